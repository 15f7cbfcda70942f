// SPDX-License-Identifier: Apache-2.0
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

// What an entry point accepts beyond the common arguments.
struct Rules {
  const char* function;
  bool log_allowed;
  bool f64_allowed;   // false for the float row statistics
  const float* p;     // the dropout probability to check, or nullptr
};

// The checks every entry point shares, in the order a caller would fix them: sizes, options,
// storage types, what this function accepts. Pointers are checked after, and only for non-empty
// calls (an empty call reads nothing, so its pointers may be NULL).
struct Checked {
  ResolvedOptions opts;
  Dtypes dtype{};
  bool empty = false;
  bool log() const { return (opts.flags & SOFTMAX_FLAG_LOG) != 0; }
  ExecContext context() const { return ExecContext{opts.stream, opts.num_threads}; }
};

Outcome check_common(const Rules& rules, int64_t rows, int64_t cols, int dtype_raw,
                     const softmax_options* options, Checked* c) {
  if (Outcome o = check_sizes(rows, cols, &c->empty); !o.good()) return o;
  if (Outcome o = resolve_options(options, &c->opts); !o.good()) return o;
  if (Outcome o = check_dtypes(dtype_raw, c->opts, &c->dtype); !o.good()) return o;
  if (c->log() && !rules.log_allowed) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_OPTIONS,
                         std::string("SOFTMAX_FLAG_LOG is not supported by ") + rules.function);
  }
  if (!rules.f64_allowed && (c->dtype.x == SOFTMAX_DTYPE_F64 || c->dtype.y == SOFTMAX_DTYPE_F64)) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_DTYPE,
                         std::string(rules.function) +
                             " keeps float row statistics, which cannot carry f64 rows");
  }
  if (rules.p != nullptr) return check_probability(*rules.p);
  return Outcome::ok();
}

size_t xsize(const Checked& c) { return dtype_size(c.dtype.x); }
size_t ysize(const Checked& c) { return dtype_size(c.dtype.y); }

}  // namespace

extern "C" softmax_status softmax_rows(const void* x, void* y, int64_t rows, int64_t cols,
                                       softmax_dtype dtype, const softmax_options* options) {
  return guarded([&]() -> Outcome {
    Checked c;
    if (Outcome o = check_common({"softmax_rows", true, true, nullptr}, rows, cols, enum_bits(dtype), options, &c);
        !o.good() || c.empty)
      return o;
    if (Outcome o = check_arrays({{"x", x, xsize(c), false, false, -1}, {"y", y, ysize(c), false, true, 0}}, rows, cols);
        !o.good())
      return o;
    const Backend* backend = nullptr;
    if (Outcome o = choose_backend(c.opts.backend, c.opts.stream, {{"x", x}, {"y", y}}, &backend); !o.good()) return o;
    return backend->rows(RowsProblem{x, y, rows, cols, c.dtype, c.log()}, c.context());
  });
}

extern "C" softmax_status softmax_dropout(const void* x, void* y, uint8_t* keep_mask, int64_t rows,
                                          int64_t cols, softmax_dtype dtype, float p, uint64_t seed,
                                          uint64_t offset, const softmax_options* options) {
  return guarded([&]() -> Outcome {
    Checked c;
    if (Outcome o = check_common({"softmax_dropout", false, true, &p}, rows, cols, enum_bits(dtype), options, &c);
        !o.good() || c.empty)
      return o;
    Outcome o = keep_mask != nullptr
                    ? check_arrays({{"x", x, xsize(c), false, false, -1},
                                    {"y", y, ysize(c), false, true, 0},
                                    {"keep_mask", keep_mask, 1, false, true, -1}},
                                   rows, cols)
                    : check_arrays({{"x", x, xsize(c), false, false, -1}, {"y", y, ysize(c), false, true, 0}},
                                   rows, cols);
    if (!o.good()) return o;
    const Backend* backend = nullptr;
    if (Outcome b = choose_backend(c.opts.backend, c.opts.stream, {{"x", x}, {"y", y}, {"keep_mask", keep_mask}}, &backend);
        !b.good())
      return b;
    return backend->dropout(RowsProblem{x, y, rows, cols, c.dtype, false},
                            DropoutParams{p, seed, offset, keep_mask}, c.context());
  });
}

extern "C" softmax_status softmax_rows_backward(const void* y, const void* dy, void* dx, int64_t rows,
                                                int64_t cols, softmax_dtype dtype,
                                                const softmax_options* options) {
  return guarded([&]() -> Outcome {
    Checked c;
    if (Outcome o = check_common({"softmax_rows_backward", true, true, nullptr}, rows, cols, enum_bits(dtype),
                                 options, &c);
        !o.good() || c.empty)
      return o;
    if (Outcome o = check_arrays({{"y", y, ysize(c), false, false, -1},
                                  {"dy", dy, ysize(c), false, false, -1},
                                  {"dx", dx, xsize(c), false, true, 1}},
                                 rows, cols);
        !o.good())
      return o;
    const Backend* backend = nullptr;
    if (Outcome o = choose_backend(c.opts.backend, c.opts.stream, {{"y", y}, {"dy", dy}, {"dx", dx}}, &backend); !o.good())
      return o;
    return backend->rows_backward(RowsBackwardProblem{y, dy, dx, rows, cols, c.dtype, c.log()}, c.context());
  });
}

extern "C" softmax_status softmax_dropout_backward(const void* x, const void* dy, void* dx, int64_t rows,
                                                   int64_t cols, softmax_dtype dtype, float p,
                                                   uint64_t seed, uint64_t offset,
                                                   const softmax_options* options) {
  return guarded([&]() -> Outcome {
    Checked c;
    if (Outcome o = check_common({"softmax_dropout_backward", false, true, &p}, rows, cols, enum_bits(dtype),
                                 options, &c);
        !o.good() || c.empty)
      return o;
    if (Outcome o = check_arrays({{"x", x, xsize(c), false, false, -1},
                                  {"dy", dy, ysize(c), false, false, -1},
                                  {"dx", dx, xsize(c), false, true, 1}},
                                 rows, cols);
        !o.good())
      return o;
    const Backend* backend = nullptr;
    if (Outcome o = choose_backend(c.opts.backend, c.opts.stream, {{"x", x}, {"dy", dy}, {"dx", dx}}, &backend); !o.good())
      return o;
    return backend->dropout_backward(DropoutBackwardProblem{x, dy, dx, rows, cols, c.dtype},
                                     DropoutParams{p, seed, offset, nullptr}, c.context());
  });
}

extern "C" softmax_status softmax_row_stats(const void* x, float* row_max, float* row_sumexp, int64_t rows,
                                            int64_t cols, softmax_dtype dtype,
                                            const softmax_options* options) {
  return guarded([&]() -> Outcome {
    Checked c;
    if (Outcome o = check_common({"softmax_row_stats", true, false, nullptr}, rows, cols, enum_bits(dtype),
                                 options, &c);
        !o.good() || c.empty)
      return o;
    if (Outcome o = check_arrays({{"x", x, xsize(c), false, false, -1},
                                  {"row_max", row_max, sizeof(float), true, true, -1},
                                  {"row_sumexp", row_sumexp, sizeof(float), true, true, -1}},
                                 rows, cols);
        !o.good())
      return o;
    const Backend* backend = nullptr;
    if (Outcome o = choose_backend(c.opts.backend, c.opts.stream, {{"x", x}, {"row_max", row_max}, {"row_sumexp", row_sumexp}},
                                   &backend);
        !o.good())
      return o;
    return backend->row_stats(RowStatsProblem{x, row_max, row_sumexp, rows, cols, c.dtype}, c.context());
  });
}

extern "C" softmax_status softmax_rows_from_stats(const void* x, void* y, const float* row_max,
                                                  const float* row_sumexp, int64_t rows, int64_t cols,
                                                  softmax_dtype dtype, const softmax_options* options) {
  return guarded([&]() -> Outcome {
    Checked c;
    if (Outcome o = check_common({"softmax_rows_from_stats", true, false, nullptr}, rows, cols, enum_bits(dtype),
                                 options, &c);
        !o.good() || c.empty)
      return o;
    if (Outcome o = check_arrays({{"x", x, xsize(c), false, false, -1},
                                  {"y", y, ysize(c), false, true, 0},
                                  {"row_max", row_max, sizeof(float), true, false, -1},
                                  {"row_sumexp", row_sumexp, sizeof(float), true, false, -1}},
                                 rows, cols);
        !o.good())
      return o;
    const Backend* backend = nullptr;
    if (Outcome o = choose_backend(c.opts.backend, c.opts.stream,
                                   {{"x", x}, {"y", y}, {"row_max", row_max}, {"row_sumexp", row_sumexp}}, &backend);
        !o.good())
      return o;
    return backend->rows_from_stats(RowsFromStatsProblem{x, y, row_max, row_sumexp, rows, cols, c.dtype, c.log()},
                                    c.context());
  });
}

extern "C" softmax_status softmax_backward_row_stats(const void* y, const void* dy, float* row_dot, int64_t rows,
                                                     int64_t cols, softmax_dtype dtype,
                                                     const softmax_options* options) {
  return guarded([&]() -> Outcome {
    Checked c;
    if (Outcome o = check_common({"softmax_backward_row_stats", true, false, nullptr}, rows, cols,
                                 enum_bits(dtype), options, &c);
        !o.good() || c.empty)
      return o;
    if (Outcome o = check_arrays({{"y", y, ysize(c), false, false, -1},
                                  {"dy", dy, ysize(c), false, false, -1},
                                  {"row_dot", row_dot, sizeof(float), true, true, -1}},
                                 rows, cols);
        !o.good())
      return o;
    const Backend* backend = nullptr;
    if (Outcome o = choose_backend(c.opts.backend, c.opts.stream, {{"y", y}, {"dy", dy}, {"row_dot", row_dot}}, &backend);
        !o.good())
      return o;
    return backend->backward_row_stats(BackwardRowStatsProblem{y, dy, row_dot, rows, cols, c.dtype, c.log()},
                                       c.context());
  });
}

extern "C" softmax_status softmax_rows_backward_from_stats(const void* y, const void* dy, void* dx,
                                                           const float* row_dot, int64_t rows, int64_t cols,
                                                           softmax_dtype dtype,
                                                           const softmax_options* options) {
  return guarded([&]() -> Outcome {
    Checked c;
    if (Outcome o = check_common({"softmax_rows_backward_from_stats", true, false, nullptr}, rows, cols,
                                 enum_bits(dtype), options, &c);
        !o.good() || c.empty)
      return o;
    if (Outcome o = check_arrays({{"y", y, ysize(c), false, false, -1},
                                  {"dy", dy, ysize(c), false, false, -1},
                                  {"dx", dx, xsize(c), false, true, 1},
                                  {"row_dot", row_dot, sizeof(float), true, false, -1}},
                                 rows, cols);
        !o.good())
      return o;
    const Backend* backend = nullptr;
    if (Outcome o = choose_backend(c.opts.backend, c.opts.stream, {{"y", y}, {"dy", dy}, {"dx", dx}, {"row_dot", row_dot}},
                                   &backend);
        !o.good())
      return o;
    return backend->rows_backward_from_stats(
        RowsBackwardFromStatsProblem{y, dy, dx, row_dot, rows, cols, c.dtype, c.log()}, c.context());
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
