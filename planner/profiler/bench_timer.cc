#include "planner/profiler/bench_timer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/check.h"

namespace dt {

double NowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  DT_CHECK(!v.empty()) << "median of nothing";
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Timing TimeRepeated(const std::function<void()>& fn, int warmup, int reps, int iters) {
  DT_CHECK(reps >= 1 && iters >= 1) << "reps=" << reps << " iters=" << iters;
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    double t0 = NowSeconds();
    for (int i = 0; i < iters; ++i) fn();
    t.push_back((NowSeconds() - t0) / iters);
  }
  Timing out;
  out.median_s = Median(t);
  out.min_s = *std::min_element(t.begin(), t.end());
  out.reps = reps;
  return out;
}

int RepsForBudget(double once_s, double budget_s, int lo, int hi) {
  if (!(once_s > 0)) return hi;
  double r = std::floor(budget_s / once_s);
  return static_cast<int>(std::max<double>(lo, std::min<double>(hi, r)));
}

}  // namespace dt
