// Repetition timing for the profiler: warmup, several timed repetitions,
// median. Wall-clock (steady_clock); the caller synchronises the device in
// `fn` when kernels are asynchronous. Pure helpers, thread-compatible.
#pragma once

#include <functional>
#include <vector>

namespace dt {

double NowSeconds();  // steady clock, seconds

// Median of `v` (mean of the two middle values for even sizes); requires
// a non-empty vector (DT_CHECK).
double Median(std::vector<double> v);

struct Timing {
  double median_s = 0;
  double min_s = 0;
  int reps = 0;
};

// Calls fn() `warmup` times untimed, then `reps` (>= 1) times, each call
// timed on its own. `iters` calls are made per repetition and the time is
// divided by it (for operations too short to time one by one).
Timing TimeRepeated(const std::function<void()>& fn, int warmup, int reps, int iters = 1);

// Repetitions that fit `budget_s` for a call of `once_s`, within [lo, hi].
int RepsForBudget(double once_s, double budget_s, int lo, int hi);

}  // namespace dt
