// libsoftmax from C++: the C ABI behind a small exception-throwing helper, log-softmax over a
// std::vector in place, and a fused softmax+dropout whose mask is checked. Exits non-zero if any
// result is wrong.
//
// Build against an installed libsoftmax:
//   cmake -S examples/cpp -B build-cpp -DCMAKE_PREFIX_PATH=<prefix> && cmake --build build-cpp
//   c++ -std=c++17 softmax_example.cpp $(pkg-config --cflags --libs softmax)
#include <softmax/softmax.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// The one place where a status becomes a C++ error, with the library's own words.
struct softmax_error : std::runtime_error {
  softmax_status status;
  softmax_error(softmax_status s, const char* what)
      : std::runtime_error(std::string(softmax_status_string(s)) + ": " + what), status(s) {}
};

void check(softmax_status s) {
  if (s != SOFTMAX_STATUS_SUCCESS) throw softmax_error(s, softmax_last_error());
}

}  // namespace

int main() {
  const int64_t rows = 64, cols = 1000;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-5.0f, 5.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = dist(gen);

  try {
    // Log-softmax in place (x == y is allowed), two CPU threads.
    std::vector<float> logp = x;
    softmax_options opts = softmax_default_options();
    opts.flags = SOFTMAX_FLAG_LOG;
    opts.num_threads = 2;
    check(softmax_rows(logp.data(), logp.data(), rows, cols, SOFTMAX_DTYPE_F32, &opts));
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(logp[r * cols + c]));
      if (std::fabs(sum - 1.0) > 1e-4) {
        std::fprintf(stderr, "row %lld: exp(log_softmax) sums to %.9g\n", (long long)r, sum);
        return 1;
      }
    }
    std::printf("log_softmax of %lld x %lld: every row's exp sums to 1\n", (long long)rows,
                (long long)cols);

    // Fused dropout: the same (seed, offset) always gives the same mask.
    std::vector<float> y(x.size()), y2(x.size());
    std::vector<uint8_t> keep(x.size()), keep2(x.size());
    check(softmax_dropout(x.data(), y.data(), keep.data(), rows, cols, SOFTMAX_DTYPE_F32, 0.1f,
                          1234, 0, nullptr));
    check(softmax_dropout(x.data(), y2.data(), keep2.data(), rows, cols, SOFTMAX_DTYPE_F32, 0.1f,
                          1234, 0, nullptr));
    std::size_t kept = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      kept += keep[i];
      if (keep[i] != keep2[i] || (keep[i] == 0 && y[i] != 0.0f)) {
        std::fprintf(stderr, "element %zu: mask not reproducible or dropped value non-zero\n", i);
        return 1;
      }
    }
    std::printf("dropout p=0.1: kept %zu of %zu (%.1f%%), mask reproducible\n", kept, x.size(),
                100.0 * double(kept) / double(x.size()));

    // A bad call throws with the library's message.
    try {
      check(softmax_rows(x.data(), y.data(), rows, -3, SOFTMAX_DTYPE_F32, nullptr));
      std::fprintf(stderr, "cols = -3 was not refused\n");
      return 1;
    } catch (const softmax_error& e) {
      std::printf("cols = -3 refused as expected: %s\n", e.what());
    }
  } catch (const softmax_error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("libsoftmax %s: C++ example OK\n", softmax_version());
  return 0;
}
