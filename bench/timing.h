#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

// Wall-clock helpers shared by lazycl-bench subcommands.
namespace lazycl::bench {

inline double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median wall time of `repeat` runs of `fn`, after `warmup` unmeasured runs.
template <class Fn>
double MedianMs(int warmup, int repeat, const Fn& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(MsSince(start));
  }
  return Median(times);
}

}  // namespace lazycl::bench
