// Small statistics helpers for the runtime benchmark. Header-only, pure.
#pragma once

#include <algorithm>
#include <vector>

namespace dt::rt::bench {

// Median of v (mean of the middle two for even sizes); 0 for an empty v.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace dt::rt::bench
