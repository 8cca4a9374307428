// ForRange: the runtime's one way to split a loop over OpenMP threads.
// ForRange(n, parallel, f) calls f(i) for i in [0, n): over the OpenMP
// threads (static partition, so results do not depend on timing) when
// `parallel`, otherwise on the calling thread without entering an OpenMP
// region. `#pragma omp parallel for if (false)` still costs about 0.4 us per
// call in libgomp (measured on this project's VM against 5 ns for the
// 64-element loop itself), which the thousands of small per-row and per-head
// calls of a step turned into milliseconds. Header-only; f must not throw.
#pragma once

#include <cstdint>

namespace dt::rt {

template <class F>
inline void ForRange(int64_t n, bool parallel, F&& f) {
  if (parallel) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
}

}  // namespace dt::rt
