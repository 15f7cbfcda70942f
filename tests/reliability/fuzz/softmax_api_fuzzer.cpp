// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the public C API on the CPU backend (built with ASan+UBSan by fuzz.sh).
//
// Each input decodes into one call of any of the eight compute functions whose every argument is
// chosen by the fuzzer: shapes (small, long rows, empty with any other size, edge values, any
// int64), dtypes (including f64 and out-of-range integers), the options struct (struct_size from
// 0 past SOFTMAX_OPTIONS_MAX_SIZE to SIZE_MAX, backend, flags, y_dtype, stream, num_threads, a
// newer caller's tail), p (NaN, infinities, negatives, > 1, denormals), and where the arrays lie
// in one heap arena: aligned or not, disjoint, in place, partially overlapping, NULL. The arena
// and the options struct are allocated to the exact byte the caller owns, so that ASan sees any
// access past them. checked_call.h then checks the invariants (status iff valid, nothing written
// on failure or outside the outputs, results against float64).
//
// Allocations stay bounded: a valid call never covers more than kMaxElements elements; shapes too
// big for the arena are only passed when some other argument makes the call invalid (the library
// must then reject it without touching memory), or when the call is empty (nothing is touched).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "checked_call.h"

using namespace softmax_reliability;

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 18;  // 1 MiB of f32: covers the long-row paths
constexpr int64_t kShortRowsElements = int64_t{1} << 15;
constexpr size_t kSmallOptions = 64;  // room for a "newer" options struct, usually

const bool g_cuda_available = softmax_backend_available(SOFTMAX_BACKEND_CUDA) != 0;

int32_t pick_dtype(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 5: return in.ConsumeIntegralInRange<int32_t>(-2, 9);
    case 6: return in.ConsumeIntegral<int32_t>();
    default: return in.ConsumeIntegralInRange<int32_t>(0, 3);
  }
}

int64_t edge_value(FuzzedDataProvider& in) {
  static const int64_t kEdges[] = {0, 1, -1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                                   255, 1024, 1025, 4096, 65536, 65537,
                                   std::numeric_limits<int64_t>::min(),
                                   std::numeric_limits<int64_t>::max(),
                                   int64_t{1} << 31, (int64_t{1} << 31) - 1, int64_t{1} << 32,
                                   int64_t{1} << 61, int64_t{1} << 62, -(int64_t{1} << 62)};
  return kEdges[in.ConsumeIntegralInRange<size_t>(0, sizeof kEdges / sizeof kEdges[0] - 1)];
}

// 1 .. max, uniform in log2 so that small and large sizes are equally likely.
int64_t log_uniform(FuzzedDataProvider& in, int64_t max) {
  int top = 0;
  while ((int64_t{2} << top) <= max) ++top;
  const int b = in.ConsumeIntegralInRange<int>(0, top);
  const int64_t lo = int64_t{1} << b;
  return in.ConsumeIntegralInRange<int64_t>(lo, std::min(max, (lo << 1) - 1));
}

void pick_shape(FuzzedDataProvider& in, int64_t* rows, int64_t* cols) {
  switch (in.ConsumeIntegralInRange<int>(0, 8)) {
    case 5:  // one or a few long rows: the chunked paths
      *rows = in.ConsumeIntegralInRange<int64_t>(1, 4);
      *cols = log_uniform(in, kMaxElements / *rows);
      return;
    case 6:
      *rows = edge_value(in);
      *cols = edge_value(in);
      return;
    case 7:
      *rows = in.ConsumeIntegral<int64_t>();
      *cols = in.ConsumeIntegral<int64_t>();
      return;
    case 8: {  // empty: one size 0, the other anything (negative ones stay invalid)
      const int64_t other = in.ConsumeBool() ? edge_value(in) : in.ConsumeIntegral<int64_t>();
      if (in.ConsumeBool()) {
        *rows = 0;
        *cols = other;
      } else {
        *rows = other;
        *cols = 0;
      }
      return;
    }
    default:  // many short rows
      *rows = log_uniform(in, 130);
      *cols = log_uniform(in, std::min<int64_t>(4100, kShortRowsElements / *rows));
      return;
  }
}

float pick_p(FuzzedDataProvider& in) {
  const float inf = std::numeric_limits<float>::infinity();
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return 0.0f;
    case 1: return 1.0f;
    case 2: return 0.5f;
    case 3: case 4: return in.ConsumeFloatingPointInRange<float>(0.0f, 1.0f);
    case 5: return std::numeric_limits<float>::quiet_NaN();
    case 6: return inf;
    case 7: return -inf;
    case 8: return -0.0f;
    case 9: return std::numeric_limits<float>::denorm_min() * in.ConsumeIntegralInRange<int>(1, 1 << 22);
    case 10: return -std::numeric_limits<float>::denorm_min();
    case 11: return std::nextafter(1.0f, 2.0f);
    case 12: return std::nextafter(1.0f, 0.0f);
    case 13: return -std::numeric_limits<float>::min();
    default: {
      const uint32_t bits = in.ConsumeIntegral<uint32_t>();
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
  }
}

// The options struct's bytes, exactly as many as the caller owns; empty for options == NULL. A
// caller owns struct_size bytes when that is within the limit, and its own struct otherwise.
std::vector<unsigned char> pick_options(FuzzedDataProvider& in) {
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) return {};
  softmax_options o = softmax_default_options();
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0: o.struct_size = kOptionsMinSize; break;  // a caller of the first version
    case 1: o.struct_size = in.ConsumeIntegralInRange<size_t>(0, kSmallOptions); break;
    case 2: o.struct_size = in.ConsumeIntegralInRange<size_t>(kSmallOptions, SOFTMAX_OPTIONS_MAX_SIZE); break;
    case 3: o.struct_size = SOFTMAX_OPTIONS_MAX_SIZE; break;
    case 4: {
      static const size_t kTooBig[] = {SOFTMAX_OPTIONS_MAX_SIZE + 1, SIZE_MAX, SIZE_MAX / 2 + 1, size_t{1} << 32};
      o.struct_size = in.ConsumeBool() ? kTooBig[in.ConsumeIntegralInRange<size_t>(0, 3)]
                                       : in.ConsumeIntegralInRange<size_t>(SOFTMAX_OPTIONS_MAX_SIZE + 1, SIZE_MAX);
      break;
    }
    default: break;  // sizeof(softmax_options)
  }
  int32_t backend = SOFTMAX_BACKEND_AUTO;
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 4: case 5: backend = SOFTMAX_BACKEND_CPU; break;
    case 6: backend = SOFTMAX_BACKEND_CUDA; break;
    case 7: backend = in.ConsumeIntegral<int32_t>(); break;
    default: break;
  }
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 4: case 5: o.flags = SOFTMAX_FLAG_LOG; break;
    case 6: case 7: o.flags = SOFTMAX_FLAG_Y_DTYPE; break;
    case 8: o.flags = SOFTMAX_FLAG_LOG | SOFTMAX_FLAG_Y_DTYPE; break;
    case 9: o.flags = in.ConsumeIntegral<uint32_t>(); break;
    default: break;
  }
  // y_dtype: a valid type, or any integer (read only behind its flag).
  const int32_t y_dtype = in.ConsumeIntegralInRange<int>(0, 4) == 0 ? in.ConsumeIntegral<int32_t>()
                                                                   : in.ConsumeIntegralInRange<int32_t>(0, 3);
  if (in.ConsumeBool()) o.stream = reinterpret_cast<void*>(in.ConsumeIntegral<uintptr_t>());
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 4: o.num_threads = in.ConsumeIntegralInRange<int32_t>(1, 4); break;
    case 5: o.num_threads = in.ConsumeIntegralInRange<int32_t>(1, 64); break;
    case 6: o.num_threads = in.ConsumeIntegralInRange<int32_t>(std::numeric_limits<int32_t>::min(), -1); break;
    // Any int32: the library must clamp huge counts itself (an early finding of this fuzzer,
    // also pinned by tests/reliability/huge_num_threads_probe.c).
    case 7: o.num_threads = in.ConsumeIntegral<int32_t>(); break;
    default: break;
  }
  // What the caller owns: at least the struct_size field itself.
  const size_t owned = o.struct_size <= SOFTMAX_OPTIONS_MAX_SIZE ? std::max(o.struct_size, sizeof o.struct_size)
                                                                 : sizeof o;
  std::vector<unsigned char> bytes(std::max(owned, sizeof o), 0);
  std::memcpy(bytes.data(), &o, sizeof o);
  // The enum fields as the raw integers a C caller may store there.
  std::memcpy(bytes.data() + offsetof(softmax_options, backend), &backend, sizeof backend);
  std::memcpy(bytes.data() + offsetof(softmax_options, y_dtype), &y_dtype, sizeof y_dtype);
  // A newer caller's tail (or, in a first-version struct, whatever follows num_threads):
  // usually zero, sometimes not.
  if (owned > kOptionsMinSize && in.ConsumeIntegralInRange<int>(0, 7) == 0) {
    bytes[in.ConsumeIntegralInRange<size_t>(kOptionsMinSize, owned - 1)] = in.ConsumeIntegralInRange<uint8_t>(1, 255);
  }
  bytes.resize(owned);
  return bytes;
}

void store(unsigned char* base, size_t i, int32_t dtype, double v) {
  switch (dtype) {
    case SOFTMAX_DTYPE_F64: std::memcpy(base + 8 * i, &v, 8); return;
    case SOFTMAX_DTYPE_F32: {
      const float f = static_cast<float>(v);
      std::memcpy(base + 4 * i, &f, 4);
      return;
    }
    default: {
      const float f = static_cast<float>(v);
      const uint16_t h =
          dtype == SOFTMAX_DTYPE_F16 ? softmax_internal::float_to_f16(f) : softmax_internal::float_to_bf16(f);
      std::memcpy(base + 2 * i, &h, 2);
    }
  }
}

// A matrix input's contents: smooth values at a few scales, raw bit patterns, or smooth values
// with special ones (NaN, infinities, huge, denormal) sprinkled in.
void fill_matrix(FuzzedDataProvider& in, unsigned char* p, size_t n, int32_t dtype, std::mt19937& rng) {
  const int mode = in.ConsumeIntegralInRange<int>(0, 5);
  static const float kScales[] = {1.0f, 8.0f, 100.0f, 3e4f, 1e30f};
  const float scale = kScales[in.ConsumeIntegralInRange<int>(0, 4)];
  if (mode == 4) {  // raw bits: anything a caller's memory can hold
    const size_t bytes = n * oracle_element_size(dtype);
    for (size_t i = 0; i < bytes; i += 4) {
      const uint32_t r = rng();
      std::memcpy(p + i, &r, std::min<size_t>(4, bytes - i));
    }
    return;
  }
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (size_t i = 0; i < n; ++i) store(p, i, dtype, dist(rng));
  if (mode == 5) {  // a constant matrix: every element ties for its row's max
    for (size_t i = 0; i < n; ++i) store(p, i, dtype, scale);
  }
  if (mode >= 2) {
    const double inf = std::numeric_limits<double>::infinity();
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(), inf, -inf, -inf, -inf,
                               3e38, -3e38, 65504.0, 1e-40, -0.0, 1e300};
    const int count = in.ConsumeIntegralInRange<int>(1, 8);
    for (int k = 0; k < count; ++k) {
      const size_t i = in.ConsumeIntegralInRange<size_t>(0, n - 1);
      store(p, i, dtype, specials[in.ConsumeIntegralInRange<size_t>(0, 10)]);
    }
  }
  if (mode == 3 && in.ConsumeBool()) {  // a run of -inf somewhere, possibly whole rows
    const size_t start = in.ConsumeIntegralInRange<size_t>(0, n - 1);
    const size_t len = in.ConsumeIntegralInRange<size_t>(1, n - start);
    for (size_t i = start; i < start + len; ++i) store(p, i, dtype, -std::numeric_limits<double>::infinity());
  }
}

// The forward's output as a backward call reads it: softmax or log-softmax of what is there.
void make_forward_output(unsigned char* p, size_t rows, size_t cols, int32_t dtype, bool log) {
  std::vector<double> row;
  for (size_t r = 0; r < rows; ++r) {
    results::softmax_row(p, r, cols, dtype, log, &row);
    for (size_t c = 0; c < cols; ++c) store(p, r * cols + c, dtype, row[c]);
  }
}

// Row statistics inputs: x's own statistics merged with an other shard's (what a caller passes),
// perturbed, or raw bits.
void fill_row_floats(FuzzedDataProvider& in, unsigned char* p, size_t rows, const unsigned char* x, size_t cols,
                     int32_t x_type, bool is_max, std::mt19937& rng) {
  const int mode = in.ConsumeIntegralInRange<int>(0, 3);
  const double other_m = in.ConsumeFloatingPointInRange<float>(-10.0f, 10.0f);
  const double other_s = in.ConsumeBool() ? 0.0 : in.ConsumeFloatingPointInRange<float>(1.0f, 1000.0f);
  for (size_t r = 0; r < rows; ++r) {
    float f;
    if (mode == 3 || x == nullptr) {
      const uint32_t bits = rng();
      std::memcpy(&f, &bits, 4);
    } else {
      std::vector<double> unused;
      double m = 0, s = 0;
      results::softmax_row(x, r, cols, x_type, false, &unused, &m, &s);
      if (m == -std::numeric_limits<double>::infinity()) s = 0;  // an all -inf shard
      const double om = other_s == 0 ? -std::numeric_limits<double>::infinity() : other_m;
      const double mm = std::isnan(m) ? m : std::max(m, om);
      double ss = 0;
      if (s != 0) ss += s * std::exp(m - mm);
      if (other_s != 0) ss += other_s * std::exp(om - mm);
      f = static_cast<float>(is_max ? mm : ss);
      if (mode == 2) f *= 1.0f + std::uniform_real_distribution<float>(-1e-3f, 1e-3f)(rng);
    }
    std::memcpy(p + 4 * r, &f, 4);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  CallArgs a;
  a.op = static_cast<Op>(in.ConsumeIntegralInRange<int>(0, kOpCount - 1));
  const OpRule& rule = op_rule(a.op);
  a.cuda_available = g_cuda_available;
  a.dtype = pick_dtype(in);
  pick_shape(in, &a.rows, &a.cols);
  const bool empty = (a.rows == 0 && a.cols >= 0) || (a.cols == 0 && a.rows >= 0);

  std::vector<unsigned char> options_bytes = pick_options(in);
  // An exact-size heap block of its own, so ASan sees reads past what the caller owns.
  unsigned char* options = options_bytes.empty() ? nullptr : static_cast<unsigned char*>(std::malloc(options_bytes.size()));
  if (options) std::memcpy(options, options_bytes.data(), options_bytes.size());
  a.options = options;
  a.p = pick_p(in);
  const uint64_t seed = in.ConsumeIntegral<uint64_t>();
  const uint64_t offset = in.ConsumeIntegral<uint64_t>();
  // NULL arrays: rarely, unless the call is empty (then its pointers may be NULL).
  bool is_null[4] = {};
  const uint8_t nulls = in.ConsumeIntegral<uint8_t>();
  for (int i = 0; i < rule.arrays; ++i) {
    is_null[i] = empty ? ((nulls >> i) & 1) != 0 : (nulls & 15) == i + 1;
    if (rule.array[i].optional) is_null[i] = (nulls & 0x30) == 0;
  }

  // The storage types as the oracle reads them (4 bytes stands in for an invalid type).
  const Verdict types = judge(a);
  const size_t x_es = oracle_element_size(types.x_type) ? oracle_element_size(types.x_type) : 4;
  const size_t y_es = oracle_element_size(types.y_type) ? oracle_element_size(types.y_type) : 4;
  const bool shape_fits = !empty && a.rows > 0 && a.cols > 0 && a.rows <= kMaxElements && a.cols <= kMaxElements &&
                          a.rows * a.cols <= kMaxElements;
  // Probe the oracle with disjoint stand-in pointers: if the call would be valid with a shape
  // that does not fit the arena, the library would rightly read past it, so skip the input.
  if (!shape_fits && !empty) {
    CallArgs probe = a;
    for (int i = 0; i < rule.arrays; ++i) {
      probe.array[i] = is_null[i] ? nullptr : reinterpret_cast<void*>((uintptr_t{1} << 40) + (static_cast<uintptr_t>(i) << 61));
    }
    const Verdict v = judge(probe);
    // Only overlap problems would make it invalid with real pointers: too risky.
    if ((v.allowed & ~(1u << SOFTMAX_STATUS_OVERLAPPING_BUFFERS)) == 0) {
      std::free(options);
      return 0;
    }
  }
  const size_t rows = shape_fits ? static_cast<size_t>(a.rows) : 4;
  const size_t cols = shape_fits ? static_cast<size_t>(a.cols) : 4;
  const size_t n = rows * cols;
  size_t bytes[4] = {};
  for (int i = 0; i < rule.arrays; ++i) {
    switch (rule.array[i].storage) {
      case Storage::X: bytes[i] = n * x_es; break;
      case Storage::Y: bytes[i] = n * y_es; break;
      case Storage::Mask: bytes[i] = n; break;
      case Storage::RowFloat: bytes[i] = rows * sizeof(float); break;
    }
  }

  // Layout in one arena.
  size_t off[4] = {};
  size_t cursor = in.ConsumeIntegralInRange<size_t>(0, 15);
  const int layout = in.ConsumeIntegralInRange<int>(0, 9);
  for (int i = 0; i < rule.arrays; ++i) {  // disjoint, each possibly misaligned
    off[i] = cursor;
    cursor += bytes[i] + in.ConsumeIntegralInRange<size_t>(0, 70);
  }
  if (layout == 3 || layout == 4 || layout == 5) {  // in place: outputs on their partners
    for (int i = 0; i < rule.arrays; ++i) {
      if (rule.array[i].in_place_with >= 0 && in.ConsumeIntegralInRange<int>(0, 3) != 0) {
        off[i] = off[rule.array[i].in_place_with];
      }
    }
  } else if (layout == 6 || layout == 7) {  // one array moved partly over another, either side
    const int moved = in.ConsumeIntegralInRange<int>(0, rule.arrays - 1);
    const int onto = in.ConsumeIntegralInRange<int>(0, rule.arrays - 1);
    const size_t span = std::max<size_t>(bytes[onto], 1);
    if (in.ConsumeBool()) {
      off[moved] = off[onto] + in.ConsumeIntegralInRange<size_t>(0, span + 8);
    } else {
      off[moved] = off[onto] - std::min(off[onto], in.ConsumeIntegralInRange<size_t>(0, bytes[moved] + 8));
    }
  } else if (layout >= 8) {  // anywhere
    size_t span = 64;
    for (int i = 0; i < rule.arrays; ++i) span += bytes[i];
    for (int i = 0; i < rule.arrays; ++i) off[i] = in.ConsumeIntegralInRange<size_t>(0, span);
  }
  // The row statistics are float* parameters: a C caller cannot even form a misaligned one.
  // (The matrices are void*: any byte address.)
  for (int i = 0; i < rule.arrays; ++i) {
    if (rule.array[i].storage == Storage::RowFloat) off[i] &= ~size_t{alignof(float) - 1};
  }
  size_t arena_size = 0;
  for (int i = 0; i < rule.arrays; ++i) arena_size = std::max(arena_size, off[i] + bytes[i]);
  arena_size += in.ConsumeIntegralInRange<size_t>(0, 32);  // canary bytes after everything
  arena_size = std::max<size_t>(arena_size, 1);

  auto* arena = static_cast<unsigned char*>(std::malloc(arena_size));
  std::mt19937 rng(in.ConsumeIntegral<uint32_t>());
  for (size_t i = 0; i < arena_size; i += 4) {
    const uint32_t r = rng();
    std::memcpy(arena + i, &r, std::min<size_t>(4, arena_size - i));
  }
  // Inputs in order (statistics after the x they describe); outputs keep the random bytes.
  const bool types_valid = oracle_element_size(types.x_type) != 0 && oracle_element_size(types.y_type) != 0;
  if (shape_fits && types_valid) {
    const unsigned char* x_for_stats = nullptr;
    for (int i = 0; i < rule.arrays; ++i) {
      const ArrayRule& ar = rule.array[i];
      if (ar.output || is_null[i]) continue;
      unsigned char* p = arena + off[i];
      if (ar.storage == Storage::RowFloat) {
        fill_row_floats(in, p, rows, x_for_stats, cols, types.x_type, std::strcmp(ar.name, "row_max") == 0, rng);
        continue;
      }
      const int32_t t = ar.storage == Storage::X ? types.x_type : types.y_type;
      fill_matrix(in, p, n, t, rng);
      if (ar.storage == Storage::X) x_for_stats = p;
      // A backward call's y is usually a forward output (log-softmax with the LOG flag).
      if (std::strcmp(ar.name, "y") == 0 && in.ConsumeIntegralInRange<int>(0, 3) != 0) {
        make_forward_output(p, rows, cols, t, types.log);
      }
    }
  }
  for (int i = 0; i < rule.arrays; ++i) a.array[i] = is_null[i] ? nullptr : arena + off[i];

  // The two functions that take an enum and return no status: any integer must give a string
  // and a 0/1 answer.
  {
    const int32_t raw = in.ConsumeIntegralInRange<int>(0, 3) == 0 ? in.ConsumeIntegral<int32_t>()
                                                                   : in.ConsumeIntegralInRange<int32_t>(-2, 16);
    const char* name = fuzz_status_string(raw);
    const int avail = fuzz_backend_available(raw);
    if (name == nullptr || std::strncmp(name, "SOFTMAX_STATUS_", 15) != 0 || (avail != 0 && avail != 1) ||
        ((raw < 0 || raw > 2) && avail != 0)) {
      std::fprintf(stderr, "\nINVARIANT BROKEN: softmax_status_string(%d) = %s, softmax_backend_available(%d) = %d\n",
                   raw, name ? name : "NULL", raw, avail);
      std::abort();
    }
  }
  CheckedCall call;
  call.args = a;
  call.seed = seed;
  call.offset = offset;
  call.arena = arena;
  call.arena_size = arena_size;
  call.options_size = options_bytes.size();
  // SOFTMAX_FUZZ_TRACE=1: print each call before making it, to name a reproducer's arguments when
  // the failure is a sanitizer abort inside the library rather than a broken invariant.
  static const bool trace = std::getenv("SOFTMAX_FUZZ_TRACE") != nullptr;
  if (trace) std::fprintf(stderr, "call: %s\n", describe(call).c_str());
  const std::string failure = run_checked(call);
  if (!failure.empty()) {
    std::fprintf(stderr, "\nINVARIANT BROKEN: %s\n  call: %s\n", failure.c_str(), describe(call).c_str());
    std::abort();
  }
  std::free(arena);
  std::free(options);
  return 0;
}
