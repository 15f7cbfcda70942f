// Many threads calling the CPU backend at once: 16 threads, many calls each, mixed shapes, dtypes
// and operations (softmax, log-softmax, dropout with and without a mask), interleaved with
// failing calls. Every successful result must be bit-identical to the same call made alone
// beforehand (which was itself checked against the float64 reference), and each thread's
// softmax_last_error() must describe that thread's own last call, whatever the others do.
// sanitizers.sh runs this under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "reference.h"

namespace {

using softmax_test::Buffer;

#if defined(__SANITIZE_THREAD__)
#define RELIABILITY_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RELIABILITY_UNDER_TSAN 1
#endif
#endif

#ifdef RELIABILITY_UNDER_TSAN
// libgomp is not instrumented: TSan cannot see its barriers and reports races between the
// threads of one parallel region. One OpenMP thread per call keeps the check about libsoftmax
// and its callers' threads (sanitizers.sh also sets OMP_NUM_THREADS=1).
constexpr int kThreadChoices[] = {1};
constexpr int kCallsPerThread = 40;
#else
constexpr int kThreadChoices[] = {0, 1, 2, 3};
constexpr int kCallsPerThread = 120;
#endif
constexpr int kCallerThreads = 16;

enum class Kind { Softmax, LogSoftmax, Dropout, DropoutNoMask };

struct Job {
  Kind kind;
  softmax_dtype dtype;
  int64_t rows, cols;
  float p;
  uint64_t seed, offset;
  Buffer x;
  Buffer want_y;                  // from a call made before any thread started
  std::vector<uint8_t> want_mask;
};

softmax_status run(const Job& j, const void* x, void* y, uint8_t* mask, int num_threads) {
  softmax_options o = softmax_default_options();
  o.backend = SOFTMAX_BACKEND_CPU;
  o.num_threads = num_threads;
  switch (j.kind) {
    case Kind::Softmax: return softmax_rows(x, y, j.rows, j.cols, j.dtype, &o);
    case Kind::LogSoftmax:
      o.flags = SOFTMAX_FLAG_LOG;
      return softmax_rows(x, y, j.rows, j.cols, j.dtype, &o);
    case Kind::Dropout:
    case Kind::DropoutNoMask:
      return softmax_dropout(x, y, j.kind == Kind::Dropout ? mask : nullptr, j.rows, j.cols,
                             j.dtype, j.p, j.seed, j.offset, &o);
  }
  return SOFTMAX_STATUS_INTERNAL_ERROR;
}

// The jobs, each computed once alone and checked against the reference.
std::vector<Job> make_jobs(uint64_t seed) {
  const int64_t shapes[][2] = {{1, 1},   {3, 7},    {64, 33},  {17, 128}, {8, 1000},
                               {2, 4099}, {1, 40000}, {2, 70001}, {300, 64}, {5, 257}};
  const softmax_dtype dtypes[] = {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16};
  const Kind kinds[] = {Kind::Softmax, Kind::LogSoftmax, Kind::Dropout, Kind::DropoutNoMask};
  std::mt19937_64 rng(seed);
  std::vector<Job> jobs;
  for (int i = 0; i < 24; ++i) {
    const auto& s = shapes[i % 10];
    const softmax_dtype dtype = dtypes[rng() % 3];
    const Kind kind = kinds[rng() % 4];
    const size_t n = size_t(s[0] * s[1]);
    Job j{kind, dtype, s[0], s[1], float(rng() % 1000) / 1000.0f, rng(), rng() % 64,
          softmax_test::random_input(dtype, n, rng()), Buffer(dtype, n), std::vector<uint8_t>(n)};
    j.want_y.poison();
    EXPECT_EQ(run(j, j.x.data(), j.want_y.data(), j.want_mask.data(), 1), SOFTMAX_STATUS_SUCCESS)
        << softmax_last_error();
    // Sanity of the stored answers against the float64 reference (scale undone for dropout).
    const bool log = kind == Kind::LogSoftmax;
    const bool dropout = kind == Kind::Dropout || kind == Kind::DropoutNoMask;
    const float scale = dropout ? 1.0f / (1.0f - j.p) : 1.0f;
    std::vector<double> ref;
    for (size_t r = 0; r < size_t(j.rows); ++r) {
      softmax_test::reference_row(j.x, r, size_t(j.cols), log, &ref);
      for (size_t c = 0; c < size_t(j.cols); ++c) {
        const size_t k = r * size_t(j.cols) + c;
        const bool kept = !dropout || softmax_internal::dropout_keep(j.seed, j.offset, k, j.p);
        if (kind == Kind::Dropout) EXPECT_EQ(j.want_mask[k], kept ? 1 : 0) << "job " << i;
        const double got = j.want_y.get(k), want = kept ? ref[c] * scale : 0.0;
        // Loose: tests/cpu owns accuracy; this only proves the stored answers are answers.
        EXPECT_NEAR(got, want, 1e-2 * std::fabs(want) + 1e-6) << "job " << i << " element " << k;
      }
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

TEST(Concurrency, SixteenThreadsMixedCallsGiveTheSameBitsAndTheirOwnErrors) {
  const uint64_t seed = softmax_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<Job> jobs = make_jobs(seed);
  ASSERT_FALSE(HasFailure());

  std::atomic<int> ready{0};
  std::vector<std::string> failures(kCallerThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallerThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + 1000003u * uint64_t(t + 1));
      std::string& failure = failures[t];
      // Start together so the calls really overlap.
      ready.fetch_add(1);
      while (ready.load() < kCallerThreads) std::this_thread::yield();
      for (int call = 0; call < kCallsPerThread && failure.empty(); ++call) {
        const std::string where = "thread " + std::to_string(t) + " call " + std::to_string(call);
        if (rng() % 4 == 0) {
          // A failing call whose message names a number unique to this thread and call.
          const int64_t bad_cols = -(int64_t(t) * 100000 + call + 1);
          float x = 0, y = 0;
          const softmax_status s = softmax_rows(&x, &y, 1, bad_cols, SOFTMAX_DTYPE_F32, nullptr);
          const std::string msg = softmax_last_error();
          if (s != SOFTMAX_STATUS_INVALID_SIZE || msg.find(std::to_string(bad_cols)) == std::string::npos) {
            failure = where + ": expected INVALID_SIZE naming " + std::to_string(bad_cols) +
                      ", got " + softmax_status_string(s) + " \"" + msg + "\"";
          }
          continue;
        }
        const Job& j = jobs[rng() % jobs.size()];
        const int nt = kThreadChoices[rng() % (sizeof kThreadChoices / sizeof kThreadChoices[0])];
        const bool in_place = rng() % 3 == 0;
        Buffer y(j.dtype, j.x.size());
        if (in_place) {
          y.bytes = j.x.bytes;
        } else {
          y.poison();
        }
        std::vector<uint8_t> mask(j.x.size(), 0xCD);
        const softmax_status s = run(j, in_place ? y.data() : j.x.data(), y.data(), mask.data(), nt);
        const std::string msg = softmax_last_error();
        if (s != SOFTMAX_STATUS_SUCCESS) {
          failure = where + ": " + softmax_status_string(s) + " \"" + msg + "\"";
        } else if (!msg.empty()) {
          failure = where + ": succeeded but softmax_last_error() is \"" + msg + "\"";
        } else if (y.bytes != j.want_y.bytes) {
          failure = where + ": result differs from the same call made alone (" +
                    softmax_test::dtype_name(j.dtype) + " " + std::to_string(j.rows) + "x" +
                    std::to_string(j.cols) + ", num_threads " + std::to_string(nt) +
                    (in_place ? ", in place)" : ")");
        } else if (j.kind == Kind::Dropout && mask != j.want_mask) {
          failure = where + ": keep_mask differs from the same call made alone";
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kCallerThreads; ++t) EXPECT_TRUE(failures[t].empty()) << failures[t];
}

// A thread's message survives other threads' successes and failures until its own next call.
TEST(Concurrency, LastErrorIsPerThread) {
  float x = 1, y = 0;
  ASSERT_EQ(softmax_rows(&x, &y, -7, 1, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_INVALID_SIZE);
  const std::string mine = softmax_last_error();
  ASSERT_NE(mine.find("-7"), std::string::npos) << mine;
  std::thread other([] {
    float a = 1, b = 0;
    EXPECT_STREQ(softmax_last_error(), "");  // a new thread starts with no error
    EXPECT_EQ(softmax_rows(&a, &b, 1, -99, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_INVALID_SIZE);
    EXPECT_NE(std::string(softmax_last_error()).find("-99"), std::string::npos);
    EXPECT_EQ(softmax_rows(&a, &b, 1, 1, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_SUCCESS);
    EXPECT_STREQ(softmax_last_error(), "");
  });
  other.join();
  EXPECT_EQ(mine, softmax_last_error());
}

}  // namespace
