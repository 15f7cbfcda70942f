// SPDX-License-Identifier: Apache-2.0
// The MPI adapter's C entry points: local statistics from libsoftmax, one MPI_Allreduce, the local
// slice of the result from libsoftmax. Every rank that gets past the argument checks joins the
// all-reduce, whether its local step worked or not, and a small failure record travels with the
// statistics, so that a failure on one rank ends the call on all of them instead of leaving the
// others waiting.
#include <softmax/softmax_mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "adapters/common/adapter_outcome.h"
#include "adapters/mpi/row_stats_pair_op.h"
#include "adapters/mpi/stats_staging.h"

using namespace softmax_adapter;

namespace {

// The failure record's slots: one per status code (slot 0 unused, codes past the last known one
// share the last slot). The forward carries the highest failing status in a (status, 0) pair that
// the pair merge keeps as a max; the backward's MPI_SUM counts failing ranks per status.
constexpr int kLastStatus = SOFTMAX_STATUS_INTERNAL_ERROR;
constexpr int kFailureSlots = kLastStatus + 1;

int status_slot(softmax_status s) {
  const int v = static_cast<int>(s);
  return v >= 1 && v <= kLastStatus ? v : kLastStatus;
}

Outcome other_rank_failed(int status) {
  const auto s = static_cast<softmax_status>(status);
  return Outcome::fail(s, std::string("another rank of the communicator failed with ") +
                              softmax_status_string(s) +
                              " (its softmax_mpi_last_error() says why); nothing was written");
}

Outcome mpi_step(const char* step, int code) {
  if (code == MPI_SUCCESS) return Outcome::ok();
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) text[0] = '\0';
  int error_class = 0;
  MPI_Error_class(code, &error_class);
  // Out of memory is the one MPI failure with a status of its own; any other means the
  // communication layer could not do its part, which is what BACKEND_UNAVAILABLE says.
  const softmax_status s =
      error_class == MPI_ERR_NO_MEM ? SOFTMAX_STATUS_OUT_OF_MEMORY : SOFTMAX_STATUS_BACKEND_UNAVAILABLE;
  return Outcome::fail(s, std::string(step) + " failed: " + text);
}

// Checks that need no communication and give the same answer on every rank that passes the same
// rows and communicator. `extra` is how many elements the all-reduce adds to `rows`.
Outcome check_before_communicating(const char* function, int64_t rows, int extra, MPI_Comm comm) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    return Outcome::fail(SOFTMAX_STATUS_BACKEND_UNAVAILABLE,
                         std::string(function) + ": MPI is " + (finalized ? "finalized" : "not initialized") +
                             " (call it between MPI_Init and MPI_Finalize)");
  }
  if (comm == MPI_COMM_NULL) {
    return Outcome::fail(SOFTMAX_STATUS_NULL_POINTER, std::string(function) + ": comm is MPI_COMM_NULL");
  }
  if (rows < 0) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_SIZE,
                         std::string(function) + ": rows must be >= 0, got " + std::to_string(rows));
  }
  // MPI counts are int; one all-reduce carries every row.
  if (rows > static_cast<int64_t>(INT_MAX) - extra) {
    return Outcome::fail(SOFTMAX_STATUS_SIZE_OVERFLOW,
                         std::string(function) + ": rows = " + std::to_string(rows) +
                             " exceeds what one MPI_Allreduce can carry (" + std::to_string(INT_MAX - extra) + ")");
  }
  return Outcome::ok();
}

// The output is only read by the step after the all-reduce, where a failure could no longer be
// shared with the other ranks; a missing one is caught before. (Other faults of the output - wrong
// memory space, partial overlap with an input - are reported by that later step, on this rank.)
Outcome output_given(const char* function, const char* name, const void* out, int64_t local_cols) {
  if (out != nullptr || local_cols <= 0) return Outcome::ok();
  return Outcome::fail(SOFTMAX_STATUS_NULL_POINTER, std::string(function) + ": " + name + " is NULL");
}

Outcome rows_mpi(const void* x, void* y, int64_t rows, int64_t local_cols, softmax_dtype dtype, MPI_Comm comm,
                 const softmax_options* options) {
  if (Outcome o = check_before_communicating("softmax_rows_mpi", rows, 1, comm); !o.good()) return o;
  if (rows == 0) return Outcome::ok();  // every rank has rows == 0: nothing to reduce or write
  const size_t n = static_cast<size_t>(rows);

  // Local statistics: row_max in [0, rows), row_sumexp in [rows, 2 rows).
  StatsStaging stats;
  Outcome local = stats.open(runs_on_cuda_backend(options, {x, y}), requested_stream(options), 2 * n);
  if (local.good()) {
    local = core_step("softmax_row_stats",
                      softmax_row_stats(x, stats.core(), stats.core() + n, rows, local_cols, dtype, options));
  }
  if (local.good()) local = output_given("softmax_rows_mpi", "y", y, local_cols);
  // libsoftmax writes nothing for a slice without columns; it joins the merge as (-inf, 0).
  if (local.good() && local_cols != 0) local = stats.download();
  if (local.good() && local_cols == 0) {
    std::fill(stats.host(), stats.host() + n, -std::numeric_limits<float>::infinity());
    std::fill(stats.host() + n, stats.host() + 2 * n, 0.0f);
  }

  // One (max, sum) pair per row after a (highest failing status, 0) pair.
  std::vector<float> pairs(2 * (n + 1), 0.0f);
  if (local.good()) {
    const float* m = stats.host();
    const float* s = stats.host() + n;
    for (size_t r = 0; r < n; ++r) {
      pairs[2 + 2 * r] = m[r];
      pairs[3 + 2 * r] = s[r];
    }
  } else {
    pairs[0] = static_cast<float>(status_slot(local.status));
  }

  RowStatsPairOp pair_op;
  if (Outcome o = mpi_step("creating the (max, sum) MPI datatype and operation", pair_op.error()); !o.good())
    return o;
  if (Outcome o = mpi_step("MPI_Allreduce of the row statistics",
                           MPI_Allreduce(MPI_IN_PLACE, pairs.data(), static_cast<int>(n + 1), pair_op.type(),
                                         pair_op.op(), comm));
      !o.good())
    return o;
  if (!local.good()) return local;
  if (pairs[0] != 0.0f) return other_rank_failed(static_cast<int>(pairs[0]));

  float* m = stats.host();
  float* s = stats.host() + n;
  for (size_t r = 0; r < n; ++r) {
    m[r] = pairs[2 + 2 * r];
    s[r] = pairs[3 + 2 * r];
  }
  if (Outcome o = stats.upload(); !o.good()) return o;
  return core_step("softmax_rows_from_stats", softmax_rows_from_stats(x, y, stats.core(), stats.core() + n, rows,
                                                                       local_cols, dtype, options));
}

Outcome rows_backward_mpi(const void* y, const void* dy, void* dx, int64_t rows, int64_t local_cols,
                          softmax_dtype dtype, MPI_Comm comm, const softmax_options* options) {
  if (Outcome o = check_before_communicating("softmax_rows_backward_mpi", rows, kFailureSlots, comm); !o.good())
    return o;
  if (rows == 0) return Outcome::ok();
  const size_t n = static_cast<size_t>(rows);

  // Reduced with MPI_SUM: the failure counts in [0, kFailureSlots) of the host buffer, then
  // row_dot (the part libsoftmax sees).
  StatsStaging stats;
  Outcome local =
      stats.open(runs_on_cuda_backend(options, {y, dy, dx}), requested_stream(options), n, kFailureSlots);
  if (local.good()) {
    local = core_step("softmax_backward_row_stats",
                      softmax_backward_row_stats(y, dy, stats.core(), rows, local_cols, dtype, options));
  }
  if (local.good()) local = output_given("softmax_rows_backward_mpi", "dx", dx, local_cols);
  // libsoftmax writes nothing for a slice without columns: its row_dot stays 0.
  if (local.good() && local_cols != 0) local = stats.download();
  float* reduced = stats.host_with_prefix();
  if (!local.good()) {
    std::fill(stats.host(), stats.host() + n, 0.0f);
    reduced[status_slot(local.status)] = 1.0f;
  }

  if (Outcome o = mpi_step("MPI_Allreduce of row_dot",
                           MPI_Allreduce(MPI_IN_PLACE, reduced, static_cast<int>(kFailureSlots + n), MPI_FLOAT,
                                         MPI_SUM, comm));
      !o.good())
    return o;
  if (!local.good()) return local;
  for (int slot = kLastStatus; slot >= 1; --slot) {
    if (reduced[slot] != 0.0f) return other_rank_failed(slot);
  }
  if (Outcome o = stats.upload(); !o.good()) return o;
  return core_step("softmax_rows_backward_from_stats",
                   softmax_rows_backward_from_stats(y, dy, dx, stats.core(), rows, local_cols, dtype, options));
}

}  // namespace

extern "C" softmax_status softmax_rows_mpi(const void* x, void* y, int64_t rows, int64_t local_cols,
                                           softmax_dtype dtype, MPI_Comm comm, const softmax_options* options) {
  return guarded([&] { return rows_mpi(x, y, rows, local_cols, dtype, comm, options); });
}

extern "C" softmax_status softmax_rows_backward_mpi(const void* y, const void* dy, void* dx, int64_t rows,
                                                    int64_t local_cols, softmax_dtype dtype, MPI_Comm comm,
                                                    const softmax_options* options) {
  return guarded([&] { return rows_backward_mpi(y, dy, dx, rows, local_cols, dtype, comm, options); });
}

extern "C" const char* softmax_mpi_last_error(void) { return last_error_text().c_str(); }
