/* SPDX-License-Identifier: Apache-2.0 */
// Runs one C API call on host memory and checks every invariant the header promises, whatever the
// arguments: SUCCESS exactly when validity_oracle.h says the arguments are valid; a failure
// names something really wrong, leaves a message and writes nothing anywhere; a success writes
// only the call's outputs (nothing at all when empty), leaves an empty message and gives the
// header's result (op_results.h, float64 reference). Shared by the libFuzzer target and the
// regression tests, so a crash input found by the fuzzer is replayed in the unit test through
// exactly the same checks.
#pragma once

#include <softmax/softmax.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/c_caller.h"
#include "op_results.h"
#include "validity_oracle.h"

namespace softmax_reliability {

// The call's memory: the arrays point into `arena` (or are NULL); the options struct, if any,
// is the options_size bytes at args.options, which the caller owns.
struct CheckedCall {
  CallArgs args;
  uint64_t seed = 0;
  uint64_t offset = 0;
  unsigned char* arena = nullptr;
  size_t arena_size = 0;
  size_t options_size = 0;
};

// A one-line description of the call, enough to write it down as a regression test.
inline std::string describe(const CheckedCall& c) {
  const CallArgs& a = c.args;
  const OpRule& rule = op_rule(a.op);
  std::string s = std::string(rule.function) + "(";
  for (int i = 0; i < rule.arrays; ++i) {
    s += std::string(rule.array[i].name) + "=";
    s += a.array[i] == nullptr
             ? "NULL"
             : "arena+" + std::to_string(static_cast<const unsigned char*>(a.array[i]) - c.arena);
    s += ", ";
  }
  s += "rows=" + std::to_string(a.rows) + ", cols=" + std::to_string(a.cols) + ", dtype=" + std::to_string(a.dtype);
  if (rule.takes_p) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ", p=%a", static_cast<double>(a.p));
    s += buf;
    s += ", seed=" + std::to_string(c.seed) + ", offset=" + std::to_string(c.offset);
  }
  if (a.options == nullptr) {
    s += ", options=NULL)";
  } else {
    // Only the fields the caller owns: options_size bytes.
    auto field = [&](const char* name, size_t offset, size_t bytes) -> std::string {
      if (offset + bytes > c.options_size) return "";
      uint64_t v = 0;
      std::memcpy(&v, a.options + offset, bytes);
      if (bytes == 4) return std::string(name) + "=" + std::to_string(static_cast<int32_t>(v)) + ", ";
      return std::string(name) + "=" + std::to_string(v) + ", ";
    };
    s += ", options={" + field("struct_size", offsetof(softmax_options, struct_size), 8) +
         field("backend", offsetof(softmax_options, backend), 4) + field("flags", offsetof(softmax_options, flags), 4) +
         field("stream", offsetof(softmax_options, stream), 8) +
         field("num_threads", offsetof(softmax_options, num_threads), 4) +
         field("y_dtype", offsetof(softmax_options, y_dtype), 4) + "tail bytes:";
    for (size_t i = sizeof(softmax_options); i < c.options_size; ++i) {
      if (a.options[i] != 0) s += " [" + std::to_string(i) + "]=" + std::to_string(a.options[i]);
    }
    s += " (" + std::to_string(c.options_size) + " bytes owned)})";
  }
  s += " arena_size=" + std::to_string(c.arena_size);
  return s;
}

// The call itself, through the C wrappers (raw integers for the enum arguments).
inline softmax_status call_c_api(const CallArgs& a, uint64_t seed, uint64_t offset) {
  const void* const* p = a.array;
  void* out1 = const_cast<void*>(p[1]);
  void* out2 = const_cast<void*>(p[2]);
  switch (a.op) {
    case Op::Rows: return fuzz_call_rows(p[0], out1, a.rows, a.cols, a.dtype, a.options);
    case Op::Dropout:
      return fuzz_call_dropout(p[0], out1, static_cast<uint8_t*>(out2), a.rows, a.cols, a.dtype, a.p, seed, offset,
                               a.options);
    case Op::RowsBackward: return fuzz_call_rows_backward(p[0], p[1], out2, a.rows, a.cols, a.dtype, a.options);
    case Op::DropoutBackward:
      return fuzz_call_dropout_backward(p[0], p[1], out2, a.rows, a.cols, a.dtype, a.p, seed, offset, a.options);
    case Op::RowStats:
      return fuzz_call_row_stats(p[0], static_cast<float*>(out1), static_cast<float*>(out2), a.rows, a.cols,
                                 a.dtype, a.options);
    case Op::RowsFromStats:
      return fuzz_call_rows_from_stats(p[0], out1, static_cast<const float*>(p[2]), static_cast<const float*>(p[3]),
                                       a.rows, a.cols, a.dtype, a.options);
    case Op::BackwardRowStats:
      return fuzz_call_backward_row_stats(p[0], p[1], static_cast<float*>(out2), a.rows, a.cols, a.dtype,
                                          a.options);
    case Op::RowsBackwardFromStats:
      return fuzz_call_rows_backward_from_stats(p[0], p[1], out2, static_cast<const float*>(p[3]), a.rows, a.cols,
                                                a.dtype, a.options);
  }
  return SOFTMAX_STATUS_INTERNAL_ERROR;
}

// The result checks alone (op_results.h) of a call that succeeded and did not overwrite any of
// its inputs: "" when its outputs are right.
inline std::string check_outputs(const CallArgs& a, uint64_t seed, uint64_t offset) {
  const Verdict v = judge(a);
  if (!v.valid()) return "the oracle judges the call invalid (status mask " + std::to_string(v.allowed) + ")";
  if (v.empty) return "";
  results::Io io{&a, &v, seed, offset, {}, {}, static_cast<size_t>(a.rows), static_cast<size_t>(a.cols)};
  for (int i = 0; i < op_rule(a.op).arrays; ++i) {
    io.before[i] = io.after[i] = static_cast<const unsigned char*>(a.array[i]);
  }
  return results::check(io);
}

// Makes the call and returns "" when every invariant holds, else what broke.
inline std::string run_checked(const CheckedCall& c) {
  const CallArgs& a = c.args;
  const OpRule& rule = op_rule(a.op);
  const Verdict verdict = judge(a);

  const std::vector<unsigned char> arena_before(c.arena, c.arena + c.arena_size);
  const std::vector<unsigned char> options_before(a.options, a.options + (a.options ? c.options_size : 0));

  const softmax_status status = call_c_api(a, c.seed, c.offset);
  const std::string message = softmax_last_error();
  const std::string status_name = softmax_status_string(status);

  if (status_name.rfind("SOFTMAX_STATUS_", 0) != 0 || status_name == "SOFTMAX_STATUS_UNKNOWN") {
    return "returned an undefined status " + std::to_string(static_cast<int>(status));
  }
  if (a.options && std::memcmp(options_before.data(), a.options, c.options_size) != 0) {
    return "the options struct was modified";
  }
  if (verdict.valid() && status != SOFTMAX_STATUS_SUCCESS) {
    return "valid arguments failed with " + status_name + ": " + message;
  }
  auto first_changed_byte = [&](auto inside_outputs) -> std::string {
    for (size_t i = 0; i < c.arena_size; ++i) {
      if (arena_before[i] != c.arena[i] && !inside_outputs(i)) return "arena+" + std::to_string(i);
    }
    return "";
  };
  if (!verdict.valid()) {
    if (status == SOFTMAX_STATUS_SUCCESS) {
      return "invalid arguments (oracle's allowed-status mask " + std::to_string(verdict.allowed) +
             ") returned SUCCESS";
    }
    if (!verdict.permits(status)) {
      return "failed with " + status_name + " (\"" + message + "\"), which names nothing wrong with the call (oracle mask " +
             std::to_string(verdict.allowed) + ")";
    }
    if (message.empty()) return "failed with " + status_name + " but softmax_last_error() is empty";
    const std::string changed = first_changed_byte([](size_t) { return false; });
    if (!changed.empty()) return "failed with " + status_name + " yet wrote byte " + changed;
    return "";
  }

  // Success.
  if (!message.empty()) return "succeeded but softmax_last_error() is \"" + message + "\"";
  if (verdict.empty) {
    const std::string changed = first_changed_byte([](size_t) { return false; });
    if (!changed.empty()) return "an empty call wrote byte " + changed;
    return "";
  }
  results::Io io{&a, &verdict, c.seed, c.offset, {}, {}, static_cast<size_t>(a.rows), static_cast<size_t>(a.cols)};
  size_t offsets[4] = {};
  for (int i = 0; i < rule.arrays; ++i) {
    if (a.array[i] == nullptr) continue;
    offsets[i] = static_cast<size_t>(static_cast<const unsigned char*>(a.array[i]) - c.arena);
    io.before[i] = arena_before.data() + offsets[i];
    io.after[i] = c.arena + offsets[i];
  }
  const std::string outside = first_changed_byte([&](size_t byte) {
    for (int i = 0; i < rule.arrays; ++i) {
      if (rule.array[i].output && a.array[i] != nullptr && byte >= offsets[i] && byte < offsets[i] + verdict.bytes[i]) {
        return true;
      }
    }
    return false;
  });
  if (!outside.empty()) return "succeeded but wrote byte " + outside + " outside its outputs";
  const std::string wrong = results::check(io);
  if (!wrong.empty()) return wrong + " -- " + describe(c);
  return "";
}

}  // namespace softmax_reliability
