// The contract between the front door (src/) and the backends: what a validated request looks
// like and the table of operations a backend offers. src/ calls into backends; backends never
// call back into src/ and never see the options struct, only resolved, checked values.
#pragma once

#include <softmax/softmax.h>

#include <cstdint>
#include <string>

namespace softmax_internal {

// A request that has passed validation: pointers non-null and in the backend's memory space,
// sizes positive and rows*cols*element_size representable, x/y either identical or disjoint.
struct RowsProblem {
  const void* x;
  void* y;
  int64_t rows;
  int64_t cols;
  softmax_dtype dtype;
  bool log_softmax;
};

// Inverted dropout parameters; p already checked to lie in [0, 1].
struct DropoutParams {
  float p;
  uint64_t seed;
  uint64_t offset;
  uint8_t* keep_mask;  // nullptr: do not write the mask
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
};

const Backend& cpu_backend();
const Backend& cuda_backend();

// Implemented next to the CUDA backend (or by its no-CUDA build): classifies a pointer.
// Without a usable driver every pointer is Host.
MemorySpace cuda_memory_space(const void* p);

}  // namespace softmax_internal
