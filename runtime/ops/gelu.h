// GeLU op (tanh approximation, as GPT-2): y = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))).
// Forward needs only x for backward (the caller stashes the input).
// Backward overwrites dx (may alias dy). Pointers in backend memory, owned
// by the caller. Not thread-safe.
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"

namespace dt::rt {

inline void GeluForward(Backend& be, const float* x, int64_t n, float* y) { be.GeluForward(x, y, n); }
inline void GeluBackward(Backend& be, const float* x, const float* dy, int64_t n, float* dx) {
  be.GeluBackward(x, dy, dx, n);
}

}  // namespace dt::rt
