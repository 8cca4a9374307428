// GeLU (tanh approximation) and its derivative, as inline scalar functions
// shared by the CPU backend and (via the same formulas) the CUDA kernels.
// Pure functions; thread-safe; no failure modes.
#pragma once

#include <cmath>

namespace dt::rt {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

inline float GeluTanh(float x) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(u));
}

// d/dx of GeluTanh.
inline float GeluTanhGrad(float x) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  const float t = std::tanh(u);
  const float du = kGeluC * (1.0f + 3.0f * kGeluA * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

}  // namespace dt::rt
