// libFuzzer target for the public C API on the CPU backend (built with ASan+UBSan by fuzz.sh).
//
// Each input decodes into one softmax_rows or softmax_dropout call whose every argument is chosen
// by the fuzzer: shapes (small, long rows, edge values, any int64), dtypes (including out-of-range
// integers), the options struct (struct_size, backend, flags, stream, num_threads, a newer
// caller's tail), p (NaN, infinities, negatives, > 1, denormals), and where x, y and keep_mask lie
// in one heap arena: aligned or not, disjoint, in place, partially overlapping, NULL. The arena is
// allocated to the exact byte so that ASan sees any access past it. checked_call.h then checks
// the invariants (status iff valid, nothing written on failure or outside y/mask, results).
//
// Allocations stay bounded: a valid call never covers more than kMaxElements elements; shapes too
// big for the arena are only passed when some other argument makes the call invalid (the library
// must then reject it without touching memory).
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
constexpr size_t kOptionsBytes = 64;                 // room for a "newer" options struct

const bool g_cuda_available = softmax_backend_available(SOFTMAX_BACKEND_CUDA) != 0;

int32_t pick_dtype(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 5: return in.ConsumeIntegralInRange<int32_t>(-2, 9);
    case 6: return in.ConsumeIntegral<int32_t>();
    default: return in.ConsumeIntegralInRange<int32_t>(0, 2);
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
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
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

// Fills the options buffer; returns false for options == NULL.
bool pick_options(FuzzedDataProvider& in, unsigned char* buf) {
  std::memset(buf, 0, kOptionsBytes);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) return false;
  softmax_options o = softmax_default_options();
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: o.struct_size = kOptionsMinSize; break;
    case 1: o.struct_size = in.ConsumeIntegralInRange<size_t>(0, kOptionsBytes); break;
    default: break;  // sizeof(softmax_options)
  }
  int32_t backend = SOFTMAX_BACKEND_AUTO;
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 4: case 5: backend = SOFTMAX_BACKEND_CPU; break;
    case 6: backend = SOFTMAX_BACKEND_CUDA; break;
    case 7: backend = in.ConsumeIntegral<int32_t>(); break;
    default: break;
  }
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 5: case 6: o.flags = SOFTMAX_FLAG_LOG; break;
    case 7: o.flags = in.ConsumeIntegral<uint32_t>(); break;
    default: break;
  }
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
  std::memcpy(buf, &o, sizeof o);
  // The enum field as the raw integer a C caller may store there.
  std::memcpy(buf + offsetof(softmax_options, backend), &backend, sizeof backend);
  // Padding and a newer caller's tail: usually zero, sometimes not.
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
    buf[in.ConsumeIntegralInRange<size_t>(offsetof(softmax_options, num_threads) + 4, kOptionsBytes - 1)] =
        in.ConsumeIntegralInRange<uint8_t>(1, 255);
  }
  return true;
}

void store(unsigned char* base, size_t i, int32_t dtype, float v) {
  if (dtype == SOFTMAX_DTYPE_F32) {
    std::memcpy(base + 4 * i, &v, 4);
  } else {
    const uint16_t h = dtype == SOFTMAX_DTYPE_F16 ? softmax_internal::float_to_f16(v)
                                                  : softmax_internal::float_to_bf16(v);
    std::memcpy(base + 2 * i, &h, 2);
  }
}

// x's contents: smooth values at a few scales, raw bit patterns, or smooth values with special
// ones (NaN, infinities, huge, denormal) sprinkled in.
void fill_input(FuzzedDataProvider& in, unsigned char* x, size_t n, int32_t dtype, std::mt19937& rng) {
  const int mode = in.ConsumeIntegralInRange<int>(0, 5);
  static const float kScales[] = {1.0f, 8.0f, 100.0f, 3e4f, 1e30f};
  const float scale = kScales[in.ConsumeIntegralInRange<int>(0, 4)];
  if (mode == 4) {  // raw bits: anything a caller's memory can hold
    const size_t bytes = n * oracle_element_size(dtype);
    for (size_t i = 0; i < bytes; i += 4) {
      const uint32_t r = rng();
      std::memcpy(x + i, &r, std::min<size_t>(4, bytes - i));
    }
    return;
  }
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (size_t i = 0; i < n; ++i) store(x, i, dtype, dist(rng));
  if (mode == 5) {  // a constant row: every element ties for the max
    for (size_t i = 0; i < n; ++i) store(x, i, dtype, scale);
  }
  if (mode >= 2) {
    const float inf = std::numeric_limits<float>::infinity();
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, -inf, -inf,
                              3e38f, -3e38f, 65504.0f, 1e-40f, -0.0f};
    const int count = in.ConsumeIntegralInRange<int>(1, 8);
    for (int k = 0; k < count; ++k) {
      const size_t i = in.ConsumeIntegralInRange<size_t>(0, n - 1);
      store(x, i, dtype, specials[in.ConsumeIntegralInRange<size_t>(0, 9)]);
    }
  }
  if (mode == 3 && in.ConsumeBool()) {  // a whole row of -inf somewhere
    const size_t start = in.ConsumeIntegralInRange<size_t>(0, n - 1);
    const size_t len = in.ConsumeIntegralInRange<size_t>(1, n - start);
    for (size_t i = start; i < start + len; ++i) store(x, i, dtype, -std::numeric_limits<float>::infinity());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  CallArgs a;
  a.op = in.ConsumeBool() ? Op::Dropout : Op::Rows;
  a.cuda_available = g_cuda_available;
  a.dtype = pick_dtype(in);
  pick_shape(in, &a.rows, &a.cols);

  std::vector<unsigned char> options_buf(kOptionsBytes);
  // An exact-size heap block of its own, so ASan sees reads past a claimed struct_size.
  unsigned char* options = static_cast<unsigned char*>(std::malloc(kOptionsBytes));
  const bool have_options = pick_options(in, options_buf.data());
  std::memcpy(options, options_buf.data(), kOptionsBytes);
  if (have_options) a.options = options;
  a.p = pick_p(in);
  const uint64_t seed = in.ConsumeIntegral<uint64_t>();
  const uint64_t offset = in.ConsumeIntegral<uint64_t>();
  const uint8_t nulls = in.ConsumeIntegral<uint8_t>();
  const bool x_null = (nulls & 15) == 1, y_null = (nulls & 15) == 2;
  const bool want_mask = a.op == Op::Dropout && (nulls & 0x30) != 0;

  // How many bytes x and y would cover if the shape were taken at its word.
  const size_t es_real = oracle_element_size(a.dtype);
  const size_t es = es_real ? es_real : 4;
  const bool shape_fits = a.rows > 0 && a.cols > 0 && a.rows <= kMaxElements &&
                          a.cols <= kMaxElements && a.rows * a.cols <= kMaxElements;
  // Probe the oracle with disjoint stand-in pointers: if the call would be valid with a shape
  // that does not fit the arena, the library would rightly read past it, so skip the input.
  {
    CallArgs probe = a;
    static unsigned char a0, a1, a2;
    probe.x = &a0;
    probe.y = &a1;
    probe.mask = want_mask ? &a2 : nullptr;
    if (!shape_fits) {
      probe.x = reinterpret_cast<void*>(uintptr_t{1} << 40);
      probe.y = reinterpret_cast<void*>(uintptr_t{1} << 62);
      probe.mask = want_mask ? reinterpret_cast<void*>(uintptr_t{3} << 62) : nullptr;
      const Verdict v = judge(probe);
      // Only overlap or backend problems would make it invalid with real pointers: too risky.
      if (v.valid() || (v.allowed & ~((1u << SOFTMAX_STATUS_OVERLAPPING_BUFFERS) |
                                      (1u << SOFTMAX_STATUS_NULL_POINTER))) == 0) {
        if (!x_null && !y_null) {
          std::free(options);
          return 0;
        }
      }
    }
  }
  const size_t n = shape_fits ? static_cast<size_t>(a.rows * a.cols) : 16;
  const size_t bytes = n * es;
  const size_t mask_bytes = want_mask ? n : 0;

  // Layout in one arena.
  size_t x_off = in.ConsumeIntegralInRange<size_t>(0, 15), y_off = 0, mask_off = 0;
  const int layout = in.ConsumeIntegralInRange<int>(0, 7);
  switch (layout) {
    case 0: case 1: case 2:  // disjoint: x, gap, y, gap, mask (each possibly misaligned)
      y_off = x_off + bytes + in.ConsumeIntegralInRange<size_t>(0, 70);
      mask_off = y_off + bytes + in.ConsumeIntegralInRange<size_t>(0, 70);
      break;
    case 3: case 4:  // in place
      y_off = x_off;
      mask_off = x_off + bytes + in.ConsumeIntegralInRange<size_t>(0, 70);
      break;
    case 5: {  // y partially overlapping x, either side
      const size_t shift = in.ConsumeIntegralInRange<size_t>(1, bytes + 8);
      if (in.ConsumeBool()) {
        y_off = x_off + shift;
      } else {
        y_off = x_off;
        x_off += shift;
      }
      mask_off = std::max(x_off, y_off) + bytes + in.ConsumeIntegralInRange<size_t>(0, 8);
      break;
    }
    default: {  // anywhere: the mask may land on x or y
      const size_t span = 2 * bytes + mask_bytes + 64;
      x_off = in.ConsumeIntegralInRange<size_t>(0, span);
      y_off = in.ConsumeBool() ? x_off : in.ConsumeIntegralInRange<size_t>(0, span);
      mask_off = in.ConsumeIntegralInRange<size_t>(0, span);
      break;
    }
  }
  size_t arena_size = std::max(x_off, y_off) + bytes;
  if (want_mask) arena_size = std::max(arena_size, mask_off + mask_bytes);
  arena_size += in.ConsumeIntegralInRange<size_t>(0, 32);  // canary bytes after everything

  auto* arena = static_cast<unsigned char*>(std::malloc(arena_size));
  std::mt19937 rng(in.ConsumeIntegral<uint32_t>());
  for (size_t i = 0; i < arena_size; i += 4) {
    const uint32_t r = rng();
    std::memcpy(arena + i, &r, std::min<size_t>(4, arena_size - i));
  }
  if (shape_fits && es_real) fill_input(in, arena + x_off, n, a.dtype, rng);

  a.x = x_null ? nullptr : arena + x_off;
  a.y = y_null ? nullptr : arena + y_off;
  a.mask = want_mask ? arena + mask_off : nullptr;

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
  call.options_size = kOptionsBytes;
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
