/* SPDX-License-Identifier: Apache-2.0 */
// The contract between the front door (src/) and the backends: what a validated request looks
// like and the table of operations a backend offers. src/ calls into backends; backends never
// call back into src/ and never see the options struct, only resolved, checked values.
#pragma once

#include <softmax/softmax.h>

#include <cstdint>
#include <string>

namespace softmax_internal {

// Storage types of one call. `x` is the type of the arrays that mirror the forward input (x, dx),
// `y` of those that mirror the forward output (y, dy). Arithmetic is fp64 when either is F64.
struct Dtypes {
  softmax_dtype x;
  softmax_dtype y;
};

inline bool fp64_arithmetic(Dtypes t) { return t.x == SOFTMAX_DTYPE_F64 || t.y == SOFTMAX_DTYPE_F64; }

// Every request below has passed validation: rows, cols > 0 (empty calls never reach a
// backend), pointers non-null and in the backend's memory space, every array's byte size
// representable, outputs disjoint from everything else except the allowed in-place pairs
// (y == x, dx == dy, each only with equal element sizes).

// softmax_rows and softmax_dropout: x -> y.
struct RowsProblem {
  const void* x;
  void* y;
  int64_t rows;
  int64_t cols;
  Dtypes dtype;
  bool log_softmax;
};

// Inverted dropout parameters; p already checked to lie in [0, 1].
struct DropoutParams {
  float p;
  uint64_t seed;
  uint64_t offset;
  uint8_t* keep_mask;  // nullptr: do not write the mask (always nullptr for the backward)
};

// softmax_rows_backward: (y, dy) -> dx.
struct RowsBackwardProblem {
  const void* y;
  const void* dy;
  void* dx;
  int64_t rows;
  int64_t cols;
  Dtypes dtype;
  bool log_softmax;
};

// softmax_dropout_backward: (x, dy) -> dx, softmax and keep mask recomputed from x.
struct DropoutBackwardProblem {
  const void* x;
  const void* dy;
  void* dx;
  int64_t rows;
  int64_t cols;
  Dtypes dtype;
};

// softmax_row_stats: x -> (row_max, row_sumexp). dtype.x is never F64.
struct RowStatsProblem {
  const void* x;
  float* row_max;
  float* row_sumexp;
  int64_t rows;
  int64_t cols;
  Dtypes dtype;
};

// softmax_rows_from_stats: (x, row_max, row_sumexp) -> y.
struct RowsFromStatsProblem {
  const void* x;
  void* y;
  const float* row_max;
  const float* row_sumexp;
  int64_t rows;
  int64_t cols;
  Dtypes dtype;
  bool log_softmax;
};

// softmax_backward_row_stats: (y, dy) -> row_dot. dtype.y is never F64.
struct BackwardRowStatsProblem {
  const void* y;
  const void* dy;
  float* row_dot;
  int64_t rows;
  int64_t cols;
  Dtypes dtype;
  bool log_softmax;
};

// softmax_rows_backward_from_stats: (y, dy, row_dot) -> dx.
struct RowsBackwardFromStatsProblem {
  const void* y;
  const void* dy;
  void* dx;
  const float* row_dot;
  int64_t rows;
  int64_t cols;
  Dtypes dtype;
  bool log_softmax;
};

struct ExecContext {
  void* stream;     // cudaStream_t (CUDA backend)
  int num_threads;  // CPU backend; 0 = OpenMP default
};

// What a backend reports back. The message is only read when status != SUCCESS.
struct Outcome {
  softmax_status status = SOFTMAX_STATUS_SUCCESS;
  std::string message;

  static Outcome ok() { return {}; }
  static Outcome fail(softmax_status s, std::string m) { return {s, std::move(m)}; }
  bool good() const { return status == SOFTMAX_STATUS_SUCCESS; }
};

// Where a pointer lives, as far as the CUDA driver knows.
enum class MemorySpace {
  Host,     // ordinary host memory (or no CUDA driver at all)
  Pinned,   // page-locked host memory registered with CUDA: reachable from both sides
  Device,   // cudaMalloc'd device memory
  Managed,  // cudaMallocManaged: reachable from both sides
};

struct Backend {
  const char* name;
  // True when the backend can run now; otherwise *why says why not.
  bool (*available)(std::string* why);
  Outcome (*rows)(const RowsProblem&, const ExecContext&);
  Outcome (*dropout)(const RowsProblem&, const DropoutParams&, const ExecContext&);
  Outcome (*rows_backward)(const RowsBackwardProblem&, const ExecContext&);
  Outcome (*dropout_backward)(const DropoutBackwardProblem&, const DropoutParams&,
                              const ExecContext&);
  Outcome (*row_stats)(const RowStatsProblem&, const ExecContext&);
  Outcome (*rows_from_stats)(const RowsFromStatsProblem&, const ExecContext&);
  Outcome (*backward_row_stats)(const BackwardRowStatsProblem&, const ExecContext&);
  Outcome (*rows_backward_from_stats)(const RowsBackwardFromStatsProblem&, const ExecContext&);
};

const Backend& cpu_backend();
const Backend& cuda_backend();

// Implemented next to the CUDA backend (or by its no-CUDA build): classifies a pointer of a
// call on `stream` (a cudaStream_t; memory the stream's graph capture allocated is Device).
// Without a usable driver every pointer is Host.
MemorySpace cuda_memory_space(const void* p, void* stream);

}  // namespace softmax_internal
