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

// The options struct as version 1 of the ABI defined it; older callers cannot exist yet, so
// this is also the smallest struct_size accepted.
constexpr size_t kOptionsV1Size = offsetof(softmax_options, num_threads) + sizeof(int32_t);
constexpr uint32_t kKnownFlags = SOFTMAX_FLAG_LOG;

bool ranges_overlap(uintptr_t a, size_t a_bytes, uintptr_t b, size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

size_t dtype_size(softmax_dtype dtype) {
  switch (dtype) {
    case SOFTMAX_DTYPE_F32: return 4;
    case SOFTMAX_DTYPE_F16: return 2;
    case SOFTMAX_DTYPE_BF16: return 2;
  }
  return 0;
}

Outcome resolve_options(const softmax_options* options, ResolvedOptions* out) {
  *out = ResolvedOptions{};
  if (options == nullptr) return Outcome::ok();
  const size_t size = options->struct_size;
  if (size < kOptionsV1Size) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_OPTIONS,
                         "options->struct_size is " + std::to_string(size) + ", expected at least " +
                             std::to_string(kOptionsV1Size) +
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
                         "options->flags has unknown bits 0x" + [&] {
                           char buf[16];
                           std::snprintf(buf, sizeof buf, "%x", options->flags & ~kKnownFlags);
                           return std::string(buf);
                         }());
  }
  if (options->num_threads < 0) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_OPTIONS,
                         "options->num_threads must be >= 0 (0 = OpenMP default), got " +
                             std::to_string(options->num_threads));
  }
  out->backend = static_cast<softmax_backend>(backend);
  out->flags = options->flags;
  out->stream = options->stream;
  out->num_threads = options->num_threads;
  return Outcome::ok();
}

Outcome check_dtype(int raw, softmax_dtype* dtype) {
  if (raw != SOFTMAX_DTYPE_F32 && raw != SOFTMAX_DTYPE_F16 && raw != SOFTMAX_DTYPE_BF16) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_DTYPE,
                         "dtype is " + std::to_string(raw) +
                             ", not one of SOFTMAX_DTYPE_F32/F16/BF16 (0/1/2)");
  }
  *dtype = static_cast<softmax_dtype>(raw);
  return Outcome::ok();
}

Outcome check_shape(int64_t rows, int64_t cols, softmax_dtype dtype, size_t* bytes) {
  if (rows <= 0) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_SIZE,
                         "rows must be > 0, got " + std::to_string(rows));
  }
  if (cols <= 0) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_SIZE,
                         "cols must be > 0, got " + std::to_string(cols));
  }
  // Every byte offset must fit in a ptrdiff_t so that pointer arithmetic stays defined.
  const auto limit = static_cast<uint64_t>(std::numeric_limits<ptrdiff_t>::max());
  const uint64_t es = dtype_size(dtype);
  const auto r = static_cast<uint64_t>(rows), c = static_cast<uint64_t>(cols);
  if (c > limit / es || r > limit / (c * es)) {
    return Outcome::fail(SOFTMAX_STATUS_SIZE_OVERFLOW,
                         "rows * cols * element size overflows: " + std::to_string(rows) + " x " +
                             std::to_string(cols) + " x " + std::to_string(es) + " bytes");
  }
  *bytes = static_cast<size_t>(r * c * es);
  return Outcome::ok();
}

Outcome check_overlap(const void* x, const void* y, size_t bytes, const void* mask,
                      size_t mask_bytes) {
  const auto xa = reinterpret_cast<uintptr_t>(x), ya = reinterpret_cast<uintptr_t>(y);
  if (xa != ya && ranges_overlap(xa, bytes, ya, bytes)) {
    return Outcome::fail(SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
                         "x and y overlap without being identical (y - x = " +
                             std::to_string(static_cast<long long>(ya - xa)) +
                             " bytes); pass y == x for in-place or disjoint buffers");
  }
  if (mask != nullptr) {
    const auto ma = reinterpret_cast<uintptr_t>(mask);
    if (ranges_overlap(ma, mask_bytes, xa, bytes) || ranges_overlap(ma, mask_bytes, ya, bytes)) {
      return Outcome::fail(SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
                           "keep_mask overlaps x or y; it needs its own rows*cols bytes");
    }
  }
  return Outcome::ok();
}

Outcome check_probability(float p) {
  if (std::isnan(p) || p < 0.0f || p > 1.0f) {
    return Outcome::fail(SOFTMAX_STATUS_INVALID_PROBABILITY,
                         "dropout p must lie in [0, 1], got " + [&] {
                           char buf[32];
                           std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(p));
                           return std::string(buf);
                         }());
  }
  return Outcome::ok();
}

}  // namespace softmax_internal
