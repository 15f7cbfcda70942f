// Which arguments the C API must accept, stated from the public header's documentation alone
// (not from src/validate.cpp), so that the fuzzer and the regression tests can check
// "SUCCESS if and only if the arguments are valid" against a second, independent reading.
//
// The oracle does not fix the order in which the library checks things: for invalid arguments it
// returns the set of statuses that name something really wrong with the call, and a failing call
// must report one of them.
#pragma once

#include <softmax/softmax.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace softmax_reliability {

enum class Op { Rows, Dropout };

// One call, with the enum arguments as the raw integers a C caller may pass.
struct CallArgs {
  Op op = Op::Rows;
  const void* x = nullptr;
  const void* y = nullptr;
  const void* mask = nullptr;  // keep_mask (dropout only)
  int64_t rows = 0;
  int64_t cols = 0;
  int32_t dtype = 0;
  const unsigned char* options = nullptr;  // the options struct's bytes, or NULL
  float p = 0.0f;
  bool cuda_available = false;  // softmax_backend_available(SOFTMAX_BACKEND_CUDA)
};

// The options layout the header defines; the first (and so far only) version of the struct ends
// after num_threads, so that is the smallest struct_size a caller can have been built with.
constexpr size_t kOptionsMinSize = offsetof(softmax_options, num_threads) + sizeof(int32_t);

struct Verdict {
  uint32_t allowed = 0;  // bit s set: failing with status s is justified
  size_t bytes = 0;      // rows*cols*element size when the shape is valid
  void allow(softmax_status s) { allowed |= 1u << static_cast<unsigned>(s); }
  bool valid() const { return allowed == 0; }
  bool permits(softmax_status s) const {
    const auto v = static_cast<unsigned>(s);
    return v < 32 && ((allowed >> v) & 1u) != 0;
  }
};

inline size_t oracle_element_size(int32_t dtype) {
  return dtype == SOFTMAX_DTYPE_F32 ? 4 : (dtype == SOFTMAX_DTYPE_F16 || dtype == SOFTMAX_DTYPE_BF16) ? 2 : 0;
}

// [a, a + an) and [b, b + bn) share a byte. 128-bit so that no size can wrap.
inline bool oracle_ranges_meet(const void* a, unsigned __int128 an, const void* b,
                               unsigned __int128 bn) {
  const auto ua = static_cast<unsigned __int128>(reinterpret_cast<uintptr_t>(a));
  const auto ub = static_cast<unsigned __int128>(reinterpret_cast<uintptr_t>(b));
  return an > 0 && bn > 0 && ua < ub + bn && ub < ua + an;
}

inline Verdict judge(const CallArgs& c) {
  Verdict v;
  if (c.x == nullptr || c.y == nullptr) v.allow(SOFTMAX_STATUS_NULL_POINTER);

  // Options: NULL means defaults. A too-small struct_size makes every other field unreadable.
  int32_t backend = SOFTMAX_BACKEND_AUTO;
  if (c.options != nullptr) {
    size_t struct_size;
    std::memcpy(&struct_size, c.options + offsetof(softmax_options, struct_size), sizeof struct_size);
    if (struct_size < kOptionsMinSize) {
      v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);
    } else {
      // A newer caller's struct: its fields unknown to this header must all be zero.
      for (size_t i = sizeof(softmax_options); i < struct_size; ++i) {
        if (c.options[i] != 0) {
          v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);
          break;
        }
      }
      uint32_t flags;
      int32_t threads;
      std::memcpy(&backend, c.options + offsetof(softmax_options, backend), sizeof backend);
      std::memcpy(&flags, c.options + offsetof(softmax_options, flags), sizeof flags);
      std::memcpy(&threads, c.options + offsetof(softmax_options, num_threads), sizeof threads);
      if (backend != SOFTMAX_BACKEND_AUTO && backend != SOFTMAX_BACKEND_CPU &&
          backend != SOFTMAX_BACKEND_CUDA) {
        v.allow(SOFTMAX_STATUS_INVALID_BACKEND);
      }
      if ((flags & ~SOFTMAX_FLAG_LOG) != 0) v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);
      if (c.op == Op::Dropout && (flags & SOFTMAX_FLAG_LOG) != 0) {
        v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);  // "SOFTMAX_FLAG_LOG is rejected here"
      }
      if (threads < 0) v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);
    }
  }

  const size_t es = oracle_element_size(c.dtype);
  if (es == 0) v.allow(SOFTMAX_STATUS_INVALID_DTYPE);

  bool shape_ok = false;
  if (c.rows <= 0 || c.cols <= 0) {
    v.allow(SOFTMAX_STATUS_INVALID_SIZE);
  } else {
    // "rows * cols * element size does not fit": every byte offset must fit a ptrdiff_t. With an
    // unknown dtype any element size of at least 2 bytes is plausible.
    const auto n = static_cast<unsigned __int128>(c.rows) * static_cast<unsigned __int128>(c.cols);
    const unsigned __int128 total = n * (es == 0 ? 2 : es);
    if (total > static_cast<unsigned __int128>(PTRDIFF_MAX)) {
      v.allow(SOFTMAX_STATUS_SIZE_OVERFLOW);
    } else if (es != 0) {
      shape_ok = true;
      v.bytes = static_cast<size_t>(total);
    }
  }

  // Overlap: x == y is in-place and fine; any other shared byte is not; the mask (rows*cols
  // bytes) must share nothing with x or y.
  if (shape_ok && c.x != nullptr && c.y != nullptr) {
    if (c.x != c.y && oracle_ranges_meet(c.x, v.bytes, c.y, v.bytes)) {
      v.allow(SOFTMAX_STATUS_OVERLAPPING_BUFFERS);
    }
    if (c.op == Op::Dropout && c.mask != nullptr) {
      const size_t mask_bytes = v.bytes / es;
      if (oracle_ranges_meet(c.mask, mask_bytes, c.x, v.bytes) ||
          oracle_ranges_meet(c.mask, mask_bytes, c.y, v.bytes)) {
        v.allow(SOFTMAX_STATUS_OVERLAPPING_BUFFERS);
      }
    }
  }

  if (c.op == Op::Dropout && !(c.p >= 0.0f && c.p <= 1.0f)) {  // NaN fails both comparisons
    v.allow(SOFTMAX_STATUS_INVALID_PROBABILITY);
  }

  // Host memory only in these callers: CUDA is refused when the backend cannot run here.
  if (backend == SOFTMAX_BACKEND_CUDA && !c.cuda_available) {
    v.allow(SOFTMAX_STATUS_BACKEND_UNAVAILABLE);
  }
  if (backend == SOFTMAX_BACKEND_CUDA && c.cuda_available) {
    // Host pointers handed to an available CUDA backend: the header allows pinned or managed
    // memory there, plain host memory is in the wrong space.
    v.allow(SOFTMAX_STATUS_WRONG_MEMORY_SPACE);
  }
  return v;
}

}  // namespace softmax_reliability
