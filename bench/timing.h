/* SPDX-License-Identifier: Apache-2.0 */
// Timing helpers shared by the CPU and GPU sections: the median of the timed runs is what is
// reported (robust against the odd preempted run on a shared 2-core machine).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <vector>

namespace bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs f() `warmup` times untimed, then `reps` times, each timed with the steady clock; returns
// the per-run times in milliseconds.
template <class F>
std::vector<double> time_host_ms(F&& f, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> ms;
  ms.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return ms;
}

// For each call in `others`, the median over `rounds` rounds of its time over base's, the calls
// of a round made in turn (base first). On a shared machine whose memory speed changes from one
// minute to the next (by 2x on the VMs measured here) a round's calls see the same speed, where
// medians of separate measurements can come from different minutes.
inline std::vector<double> median_ratios_in_turn(int rounds, const std::function<void()>& base,
                                                 const std::vector<std::function<void()>>& others) {
  std::vector<std::vector<double>> ratios(others.size());
  for (int k = 0; k < rounds; ++k) {
    const double base_ms = time_host_ms(base, 0, 1)[0];
    for (size_t i = 0; i < others.size(); ++i) ratios[i].push_back(time_host_ms(others[i], 0, 1)[0] / base_ms);
  }
  std::vector<double> out;
  for (const std::vector<double>& r : ratios) out.push_back(median(r));
  return out;
}

}  // namespace bench
