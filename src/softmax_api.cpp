// The C entry points: binding -> here -> validation -> backend table -> kernel.
// Every call clears or sets the thread's last error, and no C++ exception escapes.
#include <softmax/softmax.h>

#include <new>
#include <string>

#include "backend_choice.h"
#include "enum_bits.h"
#include "last_error.h"
#include "validate.h"

using namespace softmax_internal;

namespace {

softmax_status finish(const Outcome& o) {
  if (o.good()) {
    clear_last_error();
  } else {
    set_last_error(o.message);
  }
  return o.status;
}

// Runs `body`, turning any exception into a status so that none crosses the C ABI.
template <class Body>
softmax_status guarded(Body&& body) {
  try {
    return finish(body());
  } catch (const std::bad_alloc&) {
    return finish(Outcome::fail(SOFTMAX_STATUS_OUT_OF_MEMORY, "out of host memory"));
  } catch (const std::exception& e) {
    return finish(Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR,
                                std::string("internal error: ") + e.what()));
  } catch (...) {
    return finish(Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "internal error: unknown exception"));
  }
}

// Argument checks shared by both entry points, in the order a caller would fix them. The backend
// is chosen only after every argument is known to be well formed.
// `dtype_raw` is the caller's dtype read with enum_bits(); *dtype gets it once it is known valid.
Outcome validate_arguments(const void* x, const void* y, const void* mask, int64_t rows,
                           int64_t cols, int dtype_raw, const softmax_options* options,
                           ResolvedOptions* opts, softmax_dtype* dtype) {
  if (x == nullptr) return Outcome::fail(SOFTMAX_STATUS_NULL_POINTER, "x is NULL");
  if (y == nullptr) return Outcome::fail(SOFTMAX_STATUS_NULL_POINTER, "y is NULL");
  if (Outcome o = resolve_options(options, opts); !o.good()) return o;
  if (Outcome o = check_dtype(dtype_raw, dtype); !o.good()) return o;
  size_t bytes = 0;
  if (Outcome o = check_shape(rows, cols, *dtype, &bytes); !o.good()) return o;
  const size_t mask_bytes = bytes / dtype_size(*dtype);
  return check_overlap(x, y, bytes, mask, mask_bytes);
}

}  // namespace

extern "C" softmax_status softmax_rows(const void* x, void* y, int64_t rows, int64_t cols,
                                       softmax_dtype dtype, const softmax_options* options) {
  return guarded([&]() -> Outcome {
    ResolvedOptions opts;
    softmax_dtype type;
    const Backend* backend = nullptr;
    if (Outcome o = validate_arguments(x, y, nullptr, rows, cols, enum_bits(dtype), options, &opts, &type);
        !o.good())
      return o;
    if (Outcome o = choose_backend(opts.backend, x, y, nullptr, &backend); !o.good()) return o;
    const RowsProblem problem{x, y, rows, cols, type, (opts.flags & SOFTMAX_FLAG_LOG) != 0};
    return backend->rows(problem, ExecContext{opts.stream, opts.num_threads});
  });
}

extern "C" softmax_status softmax_dropout(const void* x, void* y, uint8_t* keep_mask, int64_t rows,
                                          int64_t cols, softmax_dtype dtype, float p, uint64_t seed,
                                          uint64_t offset, const softmax_options* options) {
  return guarded([&]() -> Outcome {
    ResolvedOptions opts;
    softmax_dtype type;
    const Backend* backend = nullptr;
    if (Outcome o =
            validate_arguments(x, y, keep_mask, rows, cols, enum_bits(dtype), options, &opts, &type);
        !o.good())
      return o;
    if (Outcome o = check_probability(p); !o.good()) return o;
    if (opts.flags & SOFTMAX_FLAG_LOG) {
      return Outcome::fail(SOFTMAX_STATUS_INVALID_OPTIONS,
                           "SOFTMAX_FLAG_LOG is not supported by softmax_dropout");
    }
    if (Outcome o = choose_backend(opts.backend, x, y, keep_mask, &backend); !o.good()) return o;
    const RowsProblem problem{x, y, rows, cols, type, false};
    return backend->dropout(problem, DropoutParams{p, seed, offset, keep_mask},
                            ExecContext{opts.stream, opts.num_threads});
  });
}

extern "C" softmax_options softmax_default_options(void) {
  softmax_options o = SOFTMAX_OPTIONS_INIT;
  return o;
}

extern "C" int softmax_backend_available(softmax_backend backend) {
  try {
    std::string why;
    switch (enum_bits(backend)) {
      case SOFTMAX_BACKEND_AUTO: return 1;
      case SOFTMAX_BACKEND_CPU: return cpu_backend().available(&why) ? 1 : 0;
      case SOFTMAX_BACKEND_CUDA: return cuda_backend().available(&why) ? 1 : 0;
    }
  } catch (...) {
  }
  return 0;
}

extern "C" const char* softmax_last_error(void) { return last_error_cstr(); }
