/* SPDX-License-Identifier: Apache-2.0 */
// What one step of an adapter call reports, the adapter's own per-thread last-error text, and the
// wrapper that keeps C++ exceptions from crossing the C ABI. Each adapter library compiles its
// own copy (hidden symbols), so the MPI and NCCL adapters keep separate messages.
#pragma once

#include <softmax/softmax.h>

#include <cstddef>
#include <new>
#include <string>
#include <utility>

namespace softmax_adapter {

struct Outcome {
  softmax_status status = SOFTMAX_STATUS_SUCCESS;
  std::string message;

  static Outcome ok() { return {}; }
  static Outcome fail(softmax_status s, std::string m) { return {s, std::move(m)}; }
  bool good() const { return status == SOFTMAX_STATUS_SUCCESS; }
};

// A libsoftmax call's status with the core's message for it, prefixed with the step's name.
inline Outcome core_step(const char* step, softmax_status s) {
  if (s == SOFTMAX_STATUS_SUCCESS) return Outcome::ok();
  return Outcome::fail(s, std::string(step) + ": " + softmax_last_error());
}

// The calling thread's message for its last failed adapter call ("" after a success).
inline std::string& last_error_text() {
  thread_local std::string text;
  return text;
}

inline softmax_status finish(Outcome o) {
  last_error_text() = o.good() ? std::string() : std::move(o.message);
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
    return finish(Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, std::string("internal error: ") + e.what()));
  } catch (...) {
    return finish(Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "internal error: unknown exception"));
  }
}

// The options fields an adapter needs before libsoftmax has checked the struct: read only when
// struct_size says the caller's struct holds them, else the default (libsoftmax then reports a
// bad struct_size itself).
inline softmax_backend requested_backend(const softmax_options* o) {
  if (o == nullptr || o->struct_size < offsetof(softmax_options, backend) + sizeof(o->backend))
    return SOFTMAX_BACKEND_AUTO;
  return o->backend;
}
inline void* requested_stream(const softmax_options* o) {
  if (o == nullptr || o->struct_size < offsetof(softmax_options, stream) + sizeof(o->stream)) return nullptr;
  return o->stream;
}

}  // namespace softmax_adapter
