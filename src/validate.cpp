// SPDX-License-Identifier: Apache-2.0
#include "validate.h"

#include "enum_bits.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

namespace softmax_internal {
namespace {

// The options struct as version 1 of the ABI defined it (through num_threads): the smallest
// struct_size accepted. y_dtype came later; SOFTMAX_FLAG_Y_DTYPE needs a struct that holds it.
constexpr size_t kOptionsV1Size = offsetof(softmax_options, num_threads) + sizeof(int32_t);
constexpr size_t kOptionsWithYDtype = offsetof(softmax_options, y_dtype) + sizeof(softmax_dtype);
constexpr uint32_t kKnownFlags = SOFTMAX_FLAG_LOG | SOFTMAX_FLAG_Y_DTYPE;

bool ranges_overlap(uintptr_t a, size_t a_bytes, uintptr_t b, size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%x", v);
  return buf;
}

bool valid_dtype(int raw) { return raw >= SOFTMAX_DTYPE_F32 && raw <= SOFTMAX_DTYPE_F64; }

constexpr const char* kDtypeChoices = "one of SOFTMAX_DTYPE_F32/F16/BF16/F64 (0/1/2/3)";

}  // namespace

size_t dtype_size(softmax_dtype dtype) {
  switch (enum_bits(dtype)) {
    case SOFTMAX_DTYPE_F32: return 4;
    case SOFTMAX_DTYPE_F16: return 2;
    case SOFTMAX_DTYPE_BF16: return 2;
    case SOFTMAX_DTYPE_F64: return 8;
  }
  return 0;
}

Outcome resolve_options(const softmax_options* options, ResolvedOptions* out) {
  *out = ResolvedOptions{};
  if (options == nullptr) return Outcome::ok();
  const size_t size = options->struct_size;
  if (size < kOptionsV1Size || size > SOFTMAX_OPTIONS_MAX_SIZE) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_OPTIONS,
                         "options->struct_size is " + std::to_string(size) + ", expected " +
                             std::to_string(kOptionsV1Size) + " to " +
                             std::to_string(SOFTMAX_OPTIONS_MAX_SIZE) +
                             " (set it to sizeof(softmax_options))");
  }
  if (size > sizeof(softmax_options)) {
    // A caller built against a newer header: fine as long as it set none of the fields this
    // version does not know about.
    const auto* tail = reinterpret_cast<const unsigned char*>(options) + sizeof(softmax_options);
    for (size_t i = 0; i < size - sizeof(softmax_options); ++i) {
      if (tail[i] != 0) {
        return Outcome::fail(SOFTMAX_STATUS_INVALID_OPTIONS,
                             "options->struct_size is " + std::to_string(size) +
                                 " and sets fields unknown to libsoftmax " + softmax_version() +
                                 " (byte " + std::to_string(sizeof(softmax_options) + i) +
                                 " is non-zero)");
      }
    }
  }
  const int backend = enum_bits(options->backend);
  if (backend != SOFTMAX_BACKEND_AUTO && backend != SOFTMAX_BACKEND_CPU &&
      backend != SOFTMAX_BACKEND_CUDA) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_BACKEND,
                         "options->backend is " + std::to_string(backend) +
                             ", not one of SOFTMAX_BACKEND_AUTO/CPU/CUDA (0/1/2)");
  }
  if ((options->flags & ~kKnownFlags) != 0) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_OPTIONS,
                         "options->flags has unknown bits 0x" + hex(options->flags & ~kKnownFlags));
  }
  if (options->num_threads < 0) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_OPTIONS,
                         "options->num_threads must be >= 0 (0 = OpenMP default), got " +
                             std::to_string(options->num_threads));
  }
  if (options->flags & SOFTMAX_FLAG_Y_DTYPE) {
    if (size < kOptionsWithYDtype) {
      return Outcome::fail(SOFTMAX_STATUS_INVALID_OPTIONS,
                           "SOFTMAX_FLAG_Y_DTYPE is set but options->struct_size is " +
                               std::to_string(size) + ", too small to hold y_dtype (needs " +
                               std::to_string(kOptionsWithYDtype) + ")");
    }
    out->has_y_dtype = true;
    out->y_dtype_raw = enum_bits(options->y_dtype);
  }
  out->backend = static_cast<softmax_backend>(backend);
  out->flags = options->flags;
  out->stream = options->stream;
  out->num_threads = options->num_threads;
  return Outcome::ok();
}

Outcome check_dtypes(int raw, const ResolvedOptions& opts, Dtypes* dtypes) {
  if (!valid_dtype(raw)) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_DTYPE,
                         "dtype is " + std::to_string(raw) + ", not " + kDtypeChoices);
  }
  if (opts.has_y_dtype && !valid_dtype(opts.y_dtype_raw)) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_DTYPE,
                         "options->y_dtype is " + std::to_string(opts.y_dtype_raw) + ", not " +
                             kDtypeChoices);
  }
  dtypes->x = static_cast<softmax_dtype>(raw);
  dtypes->y = opts.has_y_dtype ? static_cast<softmax_dtype>(opts.y_dtype_raw) : dtypes->x;
  return Outcome::ok();
}

Outcome check_sizes(int64_t rows, int64_t cols, bool* empty) {
  if (rows < 0) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_SIZE,
                         "rows must be >= 0, got " + std::to_string(rows));
  }
  if (cols < 0) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_SIZE,
                         "cols must be >= 0, got " + std::to_string(cols));
  }
  *empty = rows == 0 || cols == 0;
  return Outcome::ok();
}

Outcome check_probability(float p) {
  if (std::isnan(p) || p < 0.0f || p > 1.0f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(p));
    return Outcome::fail(SOFTMAX_STATUS_INVALID_PROBABILITY,
                         std::string("dropout p must lie in [0, 1], got ") + buf);
  }
  return Outcome::ok();
}

Outcome check_arrays(std::initializer_list<ArraySpec> arrays, int64_t rows, int64_t cols) {
  for (const ArraySpec& a : arrays) {
    if (a.ptr == nullptr) return Outcome::fail(SOFTMAX_STATUS_NULL_POINTER, std::string(a.name) + " is NULL");
  }
  // Every element must be naturally aligned: GPUs cannot load a misaligned float at all, and the
  // answer must not depend on the backend.
  for (const ArraySpec& a : arrays) {
    if (reinterpret_cast<uintptr_t>(a.ptr) % a.elem_size != 0) {
      return Outcome::fail(SOFTMAX_STATUS_MISALIGNED_POINTER,
                           std::string(a.name) + " is not aligned to its element size (" +
                               std::to_string(a.elem_size) + " bytes)");
    }
  }
  // Every byte offset must fit in a ptrdiff_t so that pointer arithmetic stays defined.
  const auto limit = static_cast<uint64_t>(std::numeric_limits<ptrdiff_t>::max());
  const auto r = static_cast<uint64_t>(rows), c = static_cast<uint64_t>(cols);
  size_t bytes[8] = {};
  size_t i = 0;
  for (const ArraySpec& a : arrays) {
    const uint64_t n_per_row = a.per_row ? 1 : c;
    if (n_per_row > limit / a.elem_size || r > limit / (n_per_row * a.elem_size)) {
      return Outcome::fail(SOFTMAX_STATUS_SIZE_OVERFLOW,
                           std::string(a.name) + ": rows * cols * element size overflows: " +
                               std::to_string(rows) + " x " + std::to_string(cols) + " x " +
                               std::to_string(a.elem_size) + " bytes");
    }
    bytes[i++] = static_cast<size_t>(r * n_per_row * a.elem_size);
  }
  const ArraySpec* list = arrays.begin();
  const size_t n = arrays.size();
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      const ArraySpec &A = list[a], &B = list[b];
      if (!A.output && !B.output) continue;
      const auto pa = reinterpret_cast<uintptr_t>(A.ptr), pb = reinterpret_cast<uintptr_t>(B.ptr);
      if (!ranges_overlap(pa, bytes[a], pb, bytes[b])) continue;
      const bool partners = A.in_place_with == static_cast<int>(b) || B.in_place_with == static_cast<int>(a);
      if (partners && pa == pb && A.elem_size == B.elem_size) continue;
      if (partners && pa == pb) {
        return Outcome::fail(SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
                             std::string(B.name) + " == " + A.name + " (in place) needs equal element sizes, got " +
                                 std::to_string(A.elem_size) + " and " + std::to_string(B.elem_size) + " bytes");
      }
      if (partners) {
        return Outcome::fail(SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
                             std::string(A.name) + " and " + B.name + " overlap without being identical (" +
                                 B.name + " - " + A.name + " = " +
                                 std::to_string(static_cast<long long>(pb - pa)) + " bytes); pass " +
                                 B.name + " == " + A.name + " for in-place or disjoint buffers");
      }
      const ArraySpec& out = B.output ? B : A;
      const ArraySpec& other = B.output ? A : B;
      return Outcome::fail(SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
                           std::string(out.name) + " overlaps " + other.name + "; it needs its own " +
                               std::to_string(&out == &B ? bytes[b] : bytes[a]) + " bytes");
    }
  }
  return Outcome::ok();
}

}  // namespace softmax_internal
