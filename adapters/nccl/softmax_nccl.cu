// SPDX-License-Identifier: Apache-2.0
// The NCCL adapter's C entry points. Everything after the argument checks is enqueued on the
// caller's stream: libsoftmax's statistics, the all-reduces, the rescale kernel, libsoftmax's
// output step, and the stream-ordered workspace around them. Nothing waits on the host, so the
// call can be captured into a CUDA graph.
#include <softmax/softmax_nccl.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <type_traits>

#include "adapters/common/adapter_outcome.h"
#include "adapters/nccl/row_stats_kernels.h"

using namespace softmax_adapter;

// The header names the communicator without including nccl.h.
static_assert(std::is_same<ncclComm_t, struct ncclComm*>::value, "ncclComm_t is not struct ncclComm*");

namespace {

Outcome cuda_step(const char* step, cudaError_t e) {
  if (e == cudaSuccess) return Outcome::ok();
  cudaGetLastError();  // do not leave the error for an unrelated later check to find
  return Outcome::fail(e == cudaErrorMemoryAllocation ? SOFTMAX_STATUS_OUT_OF_MEMORY : SOFTMAX_STATUS_CUDA_ERROR,
                       std::string(step) + ": " + cudaGetErrorString(e));
}

// A blocking communicator returns the collective's final result; a non-blocking one may answer
// ncclInProgress while it enqueues in the background, so wait (on the host, not on the stream)
// until the enqueue is done.
Outcome nccl_step(const char* step, ncclResult_t r, ncclComm_t comm) {
  while (r == ncclInProgress) {
    if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) break;
  }
  if (r == ncclSuccess) return Outcome::ok();
  std::string text = std::string(step) + " failed: " + ncclGetErrorString(r);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && detail[0] != '\0') text += std::string(" (") + detail + ")";
  // A CUDA failure inside NCCL keeps its status; any other means the communication layer could
  // not do its part, which is what BACKEND_UNAVAILABLE says.
  return Outcome::fail(r == ncclUnhandledCudaError ? SOFTMAX_STATUS_CUDA_ERROR : SOFTMAX_STATUS_BACKEND_UNAVAILABLE,
                       text);
}

// Checks made before anything is enqueued; the same on every rank given the same rows.
Outcome check_call(const char* function, int64_t rows, ncclComm_t comm) {
  if (comm == nullptr) return Outcome::fail(SOFTMAX_STATUS_NULL_POINTER, std::string(function) + ": comm is NULL");
  if (rows < 0) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_SIZE,
                         std::string(function) + ": rows must be >= 0, got " + std::to_string(rows));
  }
  return Outcome::ok();
}

// The output is first touched by the last step, after both collectives; a missing one is caught
// before them, so that this rank does not drop out of a collective the others have entered.
Outcome output_given(const char* function, const char* name, const void* out, int64_t local_cols) {
  if (out != nullptr || local_cols <= 0) return Outcome::ok();
  return Outcome::fail(SOFTMAX_STATUS_NULL_POINTER, std::string(function) + ": " + name + " is NULL");
}

// `floats` floats of stream-ordered device memory, freed (stream-ordered) on scope exit.
class Workspace {
 public:
  Workspace(cudaStream_t stream) : stream_(stream) {}
  ~Workspace() {
    if (data_ != nullptr) cudaFreeAsync(data_, stream_);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  Outcome allocate(size_t floats) {
    void* p = nullptr;
    Outcome o = cuda_step("cudaMallocAsync (workspace)", cudaMallocAsync(&p, floats * sizeof(float), stream_));
    data_ = static_cast<float*>(p);
    return o;
  }
  float* data() const { return data_; }

 private:
  cudaStream_t stream_;
  float* data_ = nullptr;
};

Outcome rows_nccl(const void* x, void* y, int64_t rows, int64_t local_cols, softmax_dtype dtype, ncclComm_t comm,
                  const softmax_options* options) {
  if (Outcome o = check_call("softmax_rows_nccl", rows, comm); !o.good()) return o;
  if (rows == 0) return Outcome::ok();  // every rank has rows == 0: nothing to reduce or write
  const size_t n = static_cast<size_t>(rows);
  const auto stream = static_cast<cudaStream_t>(requested_stream(options));

  // [local max | global max | sum]: the local maxima must outlive the max all-reduce, since the
  // rescale needs both.
  Workspace ws(stream);
  if (Outcome o = ws.allocate(3 * n); !o.good()) return o;
  float* local_max = ws.data();
  float* global_max = ws.data() + n;
  float* sum = ws.data() + 2 * n;

  if (Outcome o = core_step("softmax_row_stats",
                            softmax_row_stats(x, local_max, sum, rows, local_cols, dtype, options));
      !o.good())
    return o;
  if (Outcome o = output_given("softmax_rows_nccl", "y", y, local_cols); !o.good()) return o;
  if (local_cols == 0) {
    if (Outcome o = cuda_step("fill_empty_slice_stats", fill_empty_slice_stats(local_max, sum, rows, stream));
        !o.good())
      return o;
  }
  if (Outcome o = nccl_step("ncclAllReduce(ncclMax) of the row maxima",
                            ncclAllReduce(local_max, global_max, n, ncclFloat, ncclMax, comm, stream), comm);
      !o.good())
    return o;
  if (Outcome o = cuda_step("rescale_sums_to_global_max",
                            rescale_sums_to_global_max(sum, local_max, global_max, rows, stream));
      !o.good())
    return o;
  if (Outcome o = nccl_step("ncclAllReduce(ncclSum) of the rescaled sums",
                            ncclAllReduce(sum, sum, n, ncclFloat, ncclSum, comm, stream), comm);
      !o.good())
    return o;
  return core_step("softmax_rows_from_stats",
                   softmax_rows_from_stats(x, y, global_max, sum, rows, local_cols, dtype, options));
}

Outcome rows_backward_nccl(const void* y, const void* dy, void* dx, int64_t rows, int64_t local_cols,
                           softmax_dtype dtype, ncclComm_t comm, const softmax_options* options) {
  if (Outcome o = check_call("softmax_rows_backward_nccl", rows, comm); !o.good()) return o;
  if (rows == 0) return Outcome::ok();
  const size_t n = static_cast<size_t>(rows);
  const auto stream = static_cast<cudaStream_t>(requested_stream(options));

  Workspace ws(stream);
  if (Outcome o = ws.allocate(n); !o.good()) return o;
  float* row_dot = ws.data();

  if (Outcome o = core_step("softmax_backward_row_stats",
                            softmax_backward_row_stats(y, dy, row_dot, rows, local_cols, dtype, options));
      !o.good())
    return o;
  if (Outcome o = output_given("softmax_rows_backward_nccl", "dx", dx, local_cols); !o.good()) return o;
  if (local_cols == 0) {
    // libsoftmax writes nothing for a slice without columns; its share of every row_dot is 0.
    if (Outcome o = cuda_step("cudaMemsetAsync (row_dot of an empty slice)",
                              cudaMemsetAsync(row_dot, 0, n * sizeof(float), stream));
        !o.good())
      return o;
  }
  if (Outcome o = nccl_step("ncclAllReduce(ncclSum) of row_dot",
                            ncclAllReduce(row_dot, row_dot, n, ncclFloat, ncclSum, comm, stream), comm);
      !o.good())
    return o;
  return core_step("softmax_rows_backward_from_stats",
                   softmax_rows_backward_from_stats(y, dy, dx, row_dot, rows, local_cols, dtype, options));
}

}  // namespace

extern "C" softmax_status softmax_rows_nccl(const void* x, void* y, int64_t rows, int64_t local_cols,
                                            softmax_dtype dtype, struct ncclComm* comm,
                                            const softmax_options* options) {
  return guarded([&] { return rows_nccl(x, y, rows, local_cols, dtype, comm, options); });
}

extern "C" softmax_status softmax_rows_backward_nccl(const void* y, const void* dy, void* dx, int64_t rows,
                                                     int64_t local_cols, softmax_dtype dtype, struct ncclComm* comm,
                                                     const softmax_options* options) {
  return guarded([&] { return rows_backward_nccl(y, dy, dx, rows, local_cols, dtype, comm, options); });
}

extern "C" const char* softmax_nccl_last_error(void) { return last_error_text().c_str(); }
