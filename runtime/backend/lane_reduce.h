// LaneSum / LaneMax: row reductions of the CPU runtime (softmax, cross
// entropy, norms) in a fixed order that vectorises: kLanes interleaved
// partials, combined in lane order. The order depends on n only, so results
// are reproducible and independent of the thread count (every row is
// reduced by one thread). A serial loop would be a chain of dependent adds
// or compares, several times the row's memory time (cross entropy's forward
// ran at 13x its backward's time before it used these).
// Header-only, pure; f(i) is called once for each i in [0, n).
#pragma once

#include <cmath>
#include <cstdint>

namespace dt::rt {

constexpr int64_t kLanes = 16;  // partials per reduction (one AVX-512 register of floats)

// Sum of f(i) for i in [0, n), accumulated in double.
template <typename F>
double LaneSum(int64_t n, F f) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lane[j] += f(i + j);
  for (int64_t j = 0; i + j < n; ++j) lane[j] += f(i + j);
  double s = 0;
  for (int64_t j = 0; j < kLanes; ++j) s += lane[j];
  return s;
}

// Largest f(i) for i in [0, n) (-inf when n == 0). A NaN among the values
// may or may not be returned; callers that feed the maximum to exp() see
// NaN either way (exp(NaN - m) is NaN).
template <typename F>
float LaneMax(int64_t n, F f) {
  float lane[kLanes];
  for (int64_t j = 0; j < kLanes; ++j) lane[j] = -INFINITY;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      const float v = f(i + j);
      lane[j] = lane[j] < v ? v : lane[j];
    }
  for (int64_t j = 0; i + j < n; ++j) {
    const float v = f(i + j);
    lane[j] = lane[j] < v ? v : lane[j];
  }
  float m = lane[0];
  for (int64_t j = 1; j < kLanes; ++j) m = m < lane[j] ? lane[j] : m;
  return m;
}

}  // namespace dt::rt
